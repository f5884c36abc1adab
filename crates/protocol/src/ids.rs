//! Newtype identifiers.

use std::fmt;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Identifies one run (one execution of a graph). Time-ordered (UUID v7, 32 hex digits), so
/// sorting ids sorts runs by creation time; clients may abbreviate it to a unique prefix.
/// Cloning is a reference-count increment (every event carries its run id).
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct RunId(Arc<str>);

impl RunId {
    /// A fresh, time-ordered run id.
    pub fn new() -> Self {
        Self(Arc::from(uuid::Uuid::now_v7().simple().to_string()))
    }

    /// Wraps an existing id (read from storage or typed by a user).
    pub fn from_string(id: impl Into<String>) -> Self {
        Self(Arc::from(id.into()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 16 characters, enough to name a run in a terminal: the 12 hex digits of the
    /// creation millisecond, the UUID version digit and 12 random bits.
    pub fn short(&self) -> &str {
        self.0.get(..16).unwrap_or(&self.0)
    }
}

impl Default for RunId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Names a node of a graph. Static nodes carry the name they were declared with
/// (`code_generation`, `DONE`); nodes spawned at run time are named
/// `<spawner>/<key>` (for example `review/security`). Cloning is a reference-count increment.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct NodeId(Arc<str>);

impl NodeId {
    /// Wraps a node name.
    pub fn new(id: impl Into<String>) -> Self {
        Self(Arc::from(id.into()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id of a child spawned by `self` under `key`.
    pub fn child(&self, key: &str) -> Self {
        Self(Arc::from(format!("{}/{}", self.0, key)))
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for NodeId {
    fn from(s: &str) -> Self {
        Self(Arc::from(s))
    }
}

impl From<String> for NodeId {
    fn from(s: String) -> Self {
        Self(Arc::from(s))
    }
}

impl PartialEq<str> for NodeId {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for NodeId {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

/// One activation of a node: its `attempt`-th execution. Every time routing enters a node
/// a new activation starts at READY; earlier activations keep their final state.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub struct ActivationId {
    /// The node.
    pub node: NodeId,
    /// 1 for the first execution, 2 for the first retry, …
    pub attempt: u32,
}

impl fmt::Display for ActivationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.node, self.attempt)
    }
}

macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// A fresh, time-ordered id.
            pub fn new() -> Self {
                Self(Arc::from(format!(
                    concat!($prefix, "{}"),
                    uuid::Uuid::now_v7().simple()
                )))
            }

            /// Wraps an existing id.
            pub fn from_string(id: impl Into<String>) -> Self {
                Self(Arc::from(id.into()))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

text_id!(
    /// Identifies one submitted [`Op`](crate::Op); every event the op causes carries it.
    SubmissionId,
    "sub-"
);

text_id!(
    /// Identifies a session: the conversation of one agent node of a run, or a channel
    /// discussion. Agent sessions are named after their node ([`SessionId::for_node`]), so a
    /// process that resumes the run finds the same session.
    SessionId,
    "ses-"
);

impl SessionId {
    /// The session of agent node `node` of run `run`: `<run>:<node>`.
    pub fn for_node(run: &RunId, node: &NodeId) -> Self {
        Self::from_string(format!("{run}:{node}"))
    }
}
