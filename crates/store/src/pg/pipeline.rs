//! Statements sent together: a [`Pipeline`] runs a list of statements on one connection in
//! order, sending each before the previous one answered.
//!
//! tokio-postgres sends a request when its future is first polled and pipelines the requests
//! of futures polled together: the server runs them in the order they were first polled.
//! [`in_order`] polls in list order, and each statement goes out typed
//! (`execute_typed`: parsed, bound and run in one message, no statement prepared), so a
//! write of N statements costs one round trip where awaiting each costs N. Inside a
//! transaction a failing statement aborts it and every later one fails too;
//! [`Pipeline::run`] answers the first failure.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use tokio_postgres::Client;
use tokio_postgres::types::{ToSql, Type};

/// A statement's parameter and its type, owned by the pipeline or borrowed for its life.
pub(crate) type Param<'a> = (Box<dyn ToSql + Sync + 'a>, Type);

/// A `BIGINT` parameter.
pub(crate) fn int<'a>(v: i64) -> Param<'a> {
    (Box::new(v), Type::INT8)
}

/// A `TEXT` parameter (NULL when `None`).
pub(crate) fn text<'a>(v: Option<Cow<'a, str>>) -> Param<'a> {
    (Box::new(v), Type::TEXT)
}

/// Statements to run in order, with their parameters.
#[derive(Default)]
pub(crate) struct Pipeline<'a> {
    statements: Vec<(Cow<'static, str>, Vec<Param<'a>>)>,
}

impl<'a> Pipeline<'a> {
    /// Appends a statement.
    pub(crate) fn push(&mut self, sql: impl Into<Cow<'static, str>>, params: Vec<Param<'a>>) {
        self.statements.push((sql.into(), params));
    }

    /// How many statements it holds (the index the next one gets).
    pub(crate) fn len(&self) -> usize {
        self.statements.len()
    }

    /// Runs the statements in order on `client` (sent behind whatever was sent before);
    /// answers the index of the first one that failed, and its error.
    pub(crate) async fn run(&self, client: &Client) -> Result<(), (usize, tokio_postgres::Error)> {
        let params: Vec<Vec<(&(dyn ToSql + Sync), Type)>> = self
            .statements
            .iter()
            .map(|(_, ps)| ps.iter().map(|(v, t)| (&**v, t.clone())).collect())
            .collect();
        let runs = self
            .statements
            .iter()
            .zip(&params)
            .map(|((sql, _), ps)| client.execute_typed(sql, ps));
        match in_order(runs)
            .await
            .into_iter()
            .enumerate()
            .find(|(_, r)| r.is_err())
        {
            Some((i, Err(e))) => Err((i, e)),
            _ => Ok(()),
        }
    }
}

/// Awaits `futures` together, polling them in order (so the requests they send go out in
/// order); answers their outputs in order.
pub(crate) async fn in_order<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(out) => *output = Some(out),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}
