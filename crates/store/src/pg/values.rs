//! Values the usage, review, artifact and tool-graph domains bind and read beyond what
//! tokio-postgres maps by itself, kept as the SQLite backend keeps them.
//!
//! * A column the records hold as a store type — an artifact's status, a speculation's
//!   outcome or tools, an artifact's version (a `u32` in a BIGINT) — is read through
//!   [`Parsed`] or [`U32`]: a value that does not decode fails its row as a wrong column type
//!   does (`error deserializing column 6: unknown artifact status 'x'`, a
//!   [`PgError::Query`](super::PgError::Query)), where the SQLite row mappers fail with
//!   rusqlite's conversion error (an [`Error::Sqlite`](crate::Error::Sqlite)).
//! * A float is bound through [`real`]: SQLite stores a NaN as NULL, so a NaN cost reads
//!   back as none and a NaN confidence breaks its NOT NULL constraint; here too.
//! * Text is bound as it is. PostgreSQL text cannot hold U+0000, which SQLite text can: the
//!   server refuses such a write (SQLSTATE 22021, `invalid byte sequence for encoding
//!   "UTF8": 0x00`) and nothing of it is stored — the statement, or the transaction of a
//!   multi-statement write.

use std::error::Error as StdError;

use tokio_postgres::types::{FromSql, Type};
use trellis_protocol::ArtifactStatus;

use crate::SpeculationOutcome;

/// A stored text naming a store type, parsed; the error says what was found.
pub(crate) trait ParseText: Sized {
    /// The value of `s`, or what is wrong with it.
    fn parse_text(s: &str) -> Result<Self, String>;
}

impl ParseText for ArtifactStatus {
    fn parse_text(s: &str) -> Result<Self, String> {
        crate::artifacts::parse_status(s)
    }
}

impl ParseText for SpeculationOutcome {
    fn parse_text(s: &str) -> Result<Self, String> {
        SpeculationOutcome::parse(s).ok_or_else(|| format!("unknown speculation outcome '{s}'"))
    }
}

/// A JSON list of names (`speculations.tools`).
impl ParseText for Vec<String> {
    fn parse_text(s: &str) -> Result<Self, String> {
        serde_json::from_str(s).map_err(|e| format!("not a JSON list of names ({e}): {s}"))
    }
}

/// A text column read as `T` ([`ParseText`]).
pub(crate) struct Parsed<T>(pub(crate) T);

impl<'a, T: ParseText> FromSql<'a> for Parsed<T> {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        let s = <&str as FromSql>::from_sql(ty, raw)?;
        Ok(Parsed(T::parse_text(s)?))
    }

    fn accepts(ty: &Type) -> bool {
        <&str as FromSql>::accepts(ty)
    }
}

/// A BIGINT column read as a `u32` (rusqlite's range check).
pub(crate) struct U32(pub(crate) u32);

impl<'a> FromSql<'a> for U32 {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        let n = i64::from_sql(ty, raw)?;
        u32::try_from(n)
            .map(U32)
            .map_err(|_| format!("{n} is out of range for a u32").into())
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as FromSql>::accepts(ty)
    }
}

/// A float to bind: `None` for a NaN, which SQLite stores as NULL.
pub(crate) fn real(x: f64) -> Option<f64> {
    (!x.is_nan()).then_some(x)
}
