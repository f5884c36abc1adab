//! Notifications of committed appends (`LISTEN`/`NOTIFY`), so that every process sharing the
//! database learns at once that a stream grew, whoever appended to it: a `trellis serve`
//! instance then reads a run executing on a worker as soon as its batch commits, rather
//! than at its next poll.
//!
//! Every transaction that appends to a stream — a group commit of run batches, a batch of
//! service-stream events — also sends `NOTIFY trellis, '<stream key> <seq>'` (`run:<id>`,
//! `session:<id>`, `workspace`, and the last seq it appended) for each stream it appended
//! to, so a watcher that already has that seq (it executes the run itself) reads nothing. PostgreSQL delivers a
//! notification only when its transaction commits (a rolled-back batch notifies nobody) and
//! folds identical ones of one transaction into one. A store's watchers
//! ([`crate::Backend::watch`]) get them through one listening connection per process,
//! opened on the first watch (`super::exec`); when that connection is lost they get `*` and
//! re-read everything they follow.

/// The channel.
pub(crate) const CHANNEL: &str = "trellis";

/// Notifies the channel of one stream key (`$1`).
pub(crate) const NOTIFY_SQL: &str = "SELECT pg_notify('trellis', $1)";
