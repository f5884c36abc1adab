//! The one queue in front of the model: at most `parallel` requests generate, the others
//! wait first come, first served (tokio's semaphore hands out permits in request order),
//! and at most `max_waiting` wait — one more is turned away rather than left to grow.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub(crate) struct Queue {
    slots: Arc<Semaphore>,
    parallel: usize,
    waiting: AtomicUsize,
    max_waiting: usize,
}

/// A place in the queue; dropping it leaves the queue.
pub(crate) struct Ticket {
    queue: Arc<Queue>,
    /// Requests generating or waiting when this one arrived.
    pub(crate) ahead: usize,
    counted: bool,
}

impl Queue {
    pub(crate) fn new(parallel: usize, max_waiting: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(parallel)),
            parallel,
            waiting: AtomicUsize::new(0),
            max_waiting,
        }
    }

    /// Joins the queue, or `None` when `max_waiting` requests already wait.
    pub(crate) fn enter(self: &Arc<Self>) -> Option<Ticket> {
        let running = self.parallel - self.slots.available_permits().min(self.parallel);
        let waiting = self.waiting.fetch_add(1, Ordering::SeqCst);
        // A free slot is taken at once, so a request never waits behind an empty queue.
        if waiting >= self.max_waiting && running >= self.parallel {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Ticket {
            queue: Arc::clone(self),
            ahead: running + waiting,
            counted: true,
        })
    }
}

impl Ticket {
    /// Waits for a slot; the slot is free again when the permit is dropped.
    pub(crate) async fn acquire(mut self) -> Option<OwnedSemaphorePermit> {
        let permit = Arc::clone(&self.queue.slots).acquire_owned().await.ok();
        self.leave();
        permit
    }

    fn leave(&mut self) {
        if std::mem::take(&mut self.counted) {
            self.queue.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_queue_is_bounded_and_served_in_order() {
        let q = Arc::new(Queue::new(1, 2));
        let first = q.enter().unwrap().acquire().await.unwrap();
        let a = q.enter().unwrap();
        let b = q.enter().unwrap();
        assert_eq!((a.ahead, b.ahead), (1, 2));
        assert!(q.enter().is_none(), "a third waiter is turned away");
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (o1, o2) = (order.clone(), order.clone());
        let tb = tokio::spawn(async move {
            let _p = b.acquire().await;
            o2.lock().unwrap().push("b");
        });
        tokio::task::yield_now().await;
        let ta = tokio::spawn(async move {
            let _p = a.acquire().await;
            o1.lock().unwrap().push("a");
        });
        tokio::task::yield_now().await;
        drop(first);
        ta.await.unwrap();
        tb.await.unwrap();
        // `b` started waiting first, so it is served first.
        assert_eq!(*order.lock().unwrap(), vec!["b", "a"]);
        let again = q.enter().unwrap();
        assert_eq!(again.ahead, 0, "waiters that left no longer count");
    }
}
