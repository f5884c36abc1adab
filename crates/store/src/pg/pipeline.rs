//! Statements sent together: a [`Pipeline`] runs a list of statements on one connection, in
//! order, sending each before the previous one answered.
//!
//! tokio-postgres sends a request when its future is first polled and pipelines the requests
//! of futures polled together, so the server runs them in the order they were first polled.
//! [`Pipeline::run`] polls in list order: a write of N statements costs two round trips — one
//! preparing its distinct statements, one running them — where awaiting each costs 2N (a
//! statement given as text is prepared, then run). Inside a transaction a failing statement
//! aborts it, and every later one fails too; [`Pipeline::run`] answers the first failure.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Statement, Transaction};

/// A statement's parameter, owned by the pipeline or borrowed for its life.
pub(crate) type Param<'a> = Box<dyn ToSql + Sync + 'a>;

/// `value` as a [`Param`].
pub(crate) fn param<'a>(value: impl ToSql + Sync + 'a) -> Param<'a> {
    Box::new(value)
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

    /// Runs the statements in order inside `tx`; answers the index of the first one that
    /// failed (preparing or running) and its error.
    pub(crate) async fn run(
        &self,
        tx: &Transaction<'_>,
    ) -> Result<(), (usize, tokio_postgres::Error)> {
        // Each distinct text is prepared once.
        let mut texts: Vec<&str> = Vec::new();
        let mut text_of = Vec::with_capacity(self.statements.len());
        for (sql, _) in &self.statements {
            let i = match texts.iter().position(|t| t == sql) {
                Some(i) => i,
                None => {
                    texts.push(sql);
                    texts.len() - 1
                }
            };
            text_of.push(i);
        }
        let mut prepared: Vec<Statement> = Vec::with_capacity(texts.len());
        for (i, p) in in_order(texts.iter().map(|t| tx.prepare(t)))
            .await
            .into_iter()
            .enumerate()
        {
            match p {
                Ok(statement) => prepared.push(statement),
                Err(e) => {
                    let first_use = text_of.iter().position(|t| *t == i).unwrap_or(0);
                    return Err((first_use, e));
                }
            }
        }
        let params: Vec<Vec<&(dyn ToSql + Sync)>> = self
            .statements
            .iter()
            .map(|(_, ps)| ps.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect())
            .collect();
        let runs = text_of
            .iter()
            .zip(&params)
            .map(|(t, ps)| tx.execute(&prepared[*t], ps));
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
async fn in_order<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
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
