//! A precise sleep for the demo handlers' simulated I/O.
//!
//! `tokio::time::sleep` rounds every deadline up to the next tick of its millisecond wheel,
//! so a 10 ms sleep takes about 11 ms here: that is timer granularity, not work, and real I/O
//! (a socket becoming readable) is not rounded that way. This timer wakes sleepers from one
//! background thread at their deadline, with the operating system's wake-up slack (tens of
//! microseconds) instead.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Queue {
    deadlines: BinaryHeap<Reverse<(Instant, u64)>>,
    wakers: HashMap<u64, Waker>,
    next_id: u64,
}

struct Timer {
    queue: Mutex<Queue>,
    changed: Condvar,
}

impl Timer {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The timer thread: wakes every sleeper whose deadline passed, then waits for the next.
    fn run(&self) {
        let mut q = self.lock();
        loop {
            let now = Instant::now();
            let mut due = Vec::new();
            while let Some(Reverse((at, id))) = q.deadlines.peek().copied() {
                if at > now {
                    break;
                }
                q.deadlines.pop();
                if let Some(w) = q.wakers.remove(&id) {
                    due.push(w);
                }
            }
            if !due.is_empty() {
                drop(q);
                due.into_iter().for_each(Waker::wake);
                q = self.lock();
                continue;
            }
            q = match q.deadlines.peek() {
                None => self.changed.wait(q).unwrap_or_else(|p| p.into_inner()),
                Some(Reverse((at, _))) => {
                    let wait = at.saturating_duration_since(now);
                    self.changed
                        .wait_timeout(q, wait)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|p| p.into_inner().0)
                }
            };
        }
    }
}

static TIMER: LazyLock<Option<Arc<Timer>>> = LazyLock::new(|| {
    let timer = Arc::new(Timer {
        queue: Mutex::new(Queue::default()),
        changed: Condvar::new(),
    });
    let t = timer.clone();
    std::thread::Builder::new()
        .name("trellis-demo-timer".into())
        .spawn(move || t.run())
        .ok()
        .map(|_| timer)
});

/// Sleeps `d`, waking within the OS's timer slack of the deadline (see the module docs).
/// Falls back to `tokio::time::sleep` if the timer thread cannot start.
pub async fn sleep(d: Duration) {
    match TIMER.as_ref() {
        Some(timer) => {
            Sleep {
                deadline: Instant::now() + d,
                id: None,
                timer,
            }
            .await
        }
        None => tokio::time::sleep(d).await,
    }
}

struct Sleep {
    deadline: Instant,
    id: Option<u64>,
    timer: &'static Timer,
}

impl Sleep {
    /// Completes if the deadline has passed as of `now` (read by the caller before taking
    /// the timer's lock), else registers `waker` to be woken at the deadline.
    fn poll_at(&mut self, now: Instant, waker: &Waker) -> Poll<()> {
        if now >= self.deadline {
            return Poll::Ready(());
        }
        let mut q = self.timer.lock();
        match self.id {
            // The timer removes a sleeper's waker when it wakes it, at the deadline: no waker
            // means the deadline has passed, even though `now`, read before the lock was
            // taken, is earlier. Registering this poll's waker then would park the sleeper
            // for good — the timer woke the previous poll's waker, which the caller may no
            // longer listen to (the engine moves a handler from its first poll into its
            // in-flight set between two polls).
            Some(id) => match q.wakers.get_mut(&id) {
                Some(registered) => registered.clone_from(waker),
                None => return Poll::Ready(()),
            },
            None => {
                let id = q.next_id;
                q.next_id += 1;
                let earliest = q
                    .deadlines
                    .peek()
                    .is_none_or(|Reverse((at, _))| self.deadline < *at);
                q.deadlines.push(Reverse((self.deadline, id)));
                q.wakers.insert(id, waker.clone());
                drop(q);
                self.id = Some(id);
                if earliest {
                    self.timer.changed.notify_one();
                }
            }
        }
        Poll::Pending
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now = Instant::now();
        self.poll_at(now, cx.waker())
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.timer.lock().wakers.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sleeps_at_least_the_duration_and_not_a_tick_more() {
        let t = Instant::now();
        sleep(Duration::from_millis(10)).await;
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(10), "{took:?}");
        // Generous bound (CI machines are busy); tokio's wheel would round to >= 11 ms.
        assert!(took < Duration::from_millis(60), "{took:?}");
    }

    /// A waker that records that it was woken.
    struct Flag(std::sync::atomic::AtomicBool);

    impl std::task::Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn flag() -> (Arc<Flag>, Waker) {
        let f = Arc::new(Flag(std::sync::atomic::AtomicBool::new(false)));
        (f.clone(), Waker::from(f))
    }

    /// The engine polls a handler once with its own waker, then again from its in-flight
    /// set with another. If that second poll reads the clock just before the deadline and
    /// the timer fires (waking the first waker) before the poll takes the lock, the sleeper
    /// must complete: parking with the new waker would wait for a wake-up that never comes
    /// (the benchmark's hung run, every task parked).
    #[test]
    fn a_poll_that_races_the_timer_completes() {
        let timer = TIMER.as_ref().unwrap();
        let start = Instant::now();
        let mut s = Sleep {
            deadline: start + Duration::from_millis(2),
            id: None,
            timer,
        };
        let (first, waker) = flag();
        assert!(s.poll_at(start, &waker).is_pending());
        let waited = Instant::now();
        while !first.0.load(std::sync::atomic::Ordering::SeqCst) {
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "the timer never fired"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // The clock as read before the deadline; the timer has fired since.
        let (_second, waker) = flag();
        assert_eq!(s.poll_at(start, &waker), Poll::Ready(()));
    }

    #[tokio::test]
    async fn many_sleepers_wake_in_deadline_order() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for ms in [7u64, 3, 5, 1] {
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                sleep(Duration::from_millis(ms * 4)).await;
                order.lock().unwrap().push(ms);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![1, 3, 5, 7]);
    }
}
