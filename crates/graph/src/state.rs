//! Run state: named channels, each merged by a reducer.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use trellis_protocol::canonical::kind_of;

/// A user-defined reducer: `(current value or None, update) → new value`.
pub type ReduceFn = dyn Fn(Option<&Value>, Value) -> Result<Value, String> + Send + Sync;

/// How writes to a channel are merged into its value.
#[derive(Clone)]
pub enum Reducer {
    /// The write replaces the value.
    Replace,
    /// The value is a list; an array write is appended element-wise, any other write is pushed.
    Append,
    /// The value is an object; an object write is merged key by key (the write wins).
    Merge,
    /// Numbers are added.
    Sum,
    /// A named custom function (the name is part of the graph fingerprint).
    Custom {
        /// Name, for fingerprints and error messages.
        name: String,
        /// The function.
        f: Arc<ReduceFn>,
    },
}

impl Reducer {
    /// A custom reducer.
    pub fn custom(
        name: impl Into<String>,
        f: impl Fn(Option<&Value>, Value) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        Reducer::Custom {
            name: name.into(),
            f: Arc::new(f),
        }
    }

    /// The reducer's name.
    pub fn name(&self) -> &str {
        match self {
            Reducer::Replace => "replace",
            Reducer::Append => "append",
            Reducer::Merge => "merge",
            Reducer::Sum => "sum",
            Reducer::Custom { name, .. } => name,
        }
    }

    /// Cheap shape checks done when a node's output arrives, so a bad write fails that node
    /// instead of the whole step.
    pub(crate) fn precheck(&self, update: &Value) -> Result<(), String> {
        match (self, update) {
            (Reducer::Merge, Value::Object(_) | Value::Null) => Ok(()),
            (Reducer::Merge, other) => {
                Err(format!("merge expects an object, got {}", kind_of(other)))
            }
            (Reducer::Sum, Value::Number(_)) => Ok(()),
            (Reducer::Sum, other) => Err(format!("sum expects a number, got {}", kind_of(other))),
            _ => Ok(()),
        }
    }

    /// Merges `update` into `slot`. `replace` keeps the written value itself (shared with
    /// the event that recorded it); the others copy what they merge.
    pub(crate) fn apply(
        &self,
        slot: &mut Option<Arc<Value>>,
        update: Arc<Value>,
    ) -> Result<(), String> {
        if let Reducer::Replace = self {
            *slot = Some(update);
            return Ok(());
        }
        let update = Arc::unwrap_or_clone(update);
        match self {
            Reducer::Replace => {
                *slot = Some(Arc::new(update));
            }
            Reducer::Append => {
                let cur = slot.get_or_insert_with(|| Arc::new(Value::Array(Vec::new())));
                let cur = Arc::make_mut(cur);
                if cur.is_null() {
                    *cur = Value::Array(Vec::new());
                }
                let Value::Array(list) = cur else {
                    return Err(format!("append needs a list value, found {}", kind_of(cur)));
                };
                match update {
                    Value::Array(items) => list.extend(items),
                    other => list.push(other),
                }
            }
            Reducer::Merge => {
                let Value::Object(update) = update else {
                    return if update.is_null() {
                        Ok(())
                    } else {
                        Err(format!("merge expects an object, got {}", kind_of(&update)))
                    };
                };
                let cur = slot.get_or_insert_with(|| Arc::new(Value::Object(Map::new())));
                let cur = Arc::make_mut(cur);
                if cur.is_null() {
                    *cur = Value::Object(Map::new());
                }
                let Value::Object(map) = cur else {
                    return Err(format!(
                        "merge needs an object value, found {}",
                        kind_of(cur)
                    ));
                };
                map.extend(update);
            }
            Reducer::Sum => {
                let add = update
                    .as_f64()
                    .ok_or_else(|| format!("sum expects a number, got {}", kind_of(&update)))?;
                let cur = slot.as_deref().cloned().unwrap_or(Value::from(0));
                let sum = match (cur.as_i64(), update.as_i64()) {
                    (Some(a), Some(b)) => Value::from(a.wrapping_add(b)),
                    _ => Value::from(cur.as_f64().unwrap_or(0.0) + add),
                };
                *slot = Some(Arc::new(sum));
            }
            Reducer::Custom { f, .. } => {
                let next = f(slot.as_deref(), update)?;
                *slot = Some(Arc::new(next));
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Reducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The values of a run's channels. Values are shared (`Arc`), so handing a snapshot to every
/// handler of a step costs one map clone, not a deep copy.
#[derive(Clone, Default, PartialEq)]
pub struct State {
    pub(crate) channels: BTreeMap<String, Arc<Value>>,
}

impl State {
    /// A channel's value.
    pub fn get(&self, channel: &str) -> Option<&Value> {
        self.channels.get(channel).map(|v| &**v)
    }

    /// A channel's value deserialised into `T` (`None` if unset).
    pub fn get_as<T: DeserializeOwned>(
        &self,
        channel: &str,
    ) -> Result<Option<T>, serde_json::Error> {
        self.get(channel).map(|v| T::deserialize(v)).transpose()
    }

    /// Looks up `channel` then `key` inside it (for object channels).
    pub fn get_in(&self, channel: &str, key: &str) -> Option<&Value> {
        self.get(channel).and_then(|v| v.get(key))
    }

    /// All channels as one JSON object.
    pub fn to_json(&self) -> Value {
        Value::Object(
            self.channels
                .iter()
                .map(|(k, v)| (k.clone(), (**v).clone()))
                .collect(),
        )
    }

    /// Channel names that have a value.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.channels.keys().map(String::as_str)
    }

    pub(crate) fn apply(
        &mut self,
        reducer: &Reducer,
        channel: &str,
        update: Arc<Value>,
    ) -> Result<(), String> {
        static UNSET: std::sync::LazyLock<Arc<Value>> =
            std::sync::LazyLock::new(|| Arc::new(Value::Null));
        let Some(value) = self.channels.get_mut(channel) else {
            let mut slot = None;
            let res = reducer.apply(&mut slot, update);
            if let Some(v) = slot {
                self.channels.insert(channel.to_owned(), v);
            }
            return res;
        };
        // Updated in place: the value is moved out (so `Arc::make_mut` does not copy it when
        // no snapshot shares it) and always put back, also when the reducer fails.
        let mut slot = Some(std::mem::replace(value, UNSET.clone()));
        let res = reducer.apply(&mut slot, update);
        if let Some(v) = slot {
            *value = v;
        }
        res
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_json())
    }
}

/// As one JSON object of the channels' values ([`State::to_json`]): how a run's outcome
/// shows its state.
impl serde::Serialize for State {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let map: BTreeMap<&str, &Value> = self
            .channels
            .iter()
            .map(|(k, v)| (k.as_str(), &**v))
            .collect();
        map.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(r: &Reducer, init: Option<Value>, updates: Vec<Value>) -> Result<Value, String> {
        let mut slot = init.map(Arc::new);
        for u in updates {
            r.apply(&mut slot, Arc::new(u))?;
        }
        Ok(slot.map(|v| (*v).clone()).unwrap_or(Value::Null))
    }

    #[test]
    fn replace_keeps_last() {
        assert_eq!(
            run(
                &Reducer::Replace,
                Some(json!(1)),
                vec![json!(2), json!("x")]
            )
            .unwrap(),
            json!("x")
        );
    }

    #[test]
    fn append_extends_arrays_and_pushes_scalars() {
        let v = run(
            &Reducer::Append,
            None,
            vec![json!([1, 2]), json!(3), json!([[4]])],
        )
        .unwrap();
        assert_eq!(v, json!([1, 2, 3, [4]]));
        assert!(run(&Reducer::Append, Some(json!({"a": 1})), vec![json!(1)]).is_err());
    }

    #[test]
    fn merge_is_shallow_and_right_wins() {
        let v = run(
            &Reducer::Merge,
            Some(json!({"a": 1, "b": {"x": 1}})),
            vec![json!({"b": {"y": 2}, "c": 3})],
        )
        .unwrap();
        assert_eq!(v, json!({"a": 1, "b": {"y": 2}, "c": 3}));
        let err = run(&Reducer::Merge, None, vec![json!([1])]).unwrap_err();
        assert_eq!(err, "merge expects an object, got a list");
    }

    #[test]
    fn sum_adds_integers_and_floats() {
        assert_eq!(
            run(&Reducer::Sum, None, vec![json!(2), json!(3)]).unwrap(),
            json!(5)
        );
        assert_eq!(
            run(&Reducer::Sum, Some(json!(1)), vec![json!(0.5)]).unwrap(),
            json!(1.5)
        );
        assert!(Reducer::Sum.precheck(&json!("1")).is_err());
    }

    #[test]
    fn custom_reducer_sees_current_value() {
        let max = Reducer::custom("max", |cur, new| {
            let a = cur.and_then(Value::as_i64).unwrap_or(i64::MIN);
            let b = new.as_i64().ok_or("not an integer")?;
            Ok(json!(a.max(b)))
        });
        assert_eq!(
            run(&max, None, vec![json!(3), json!(9), json!(4)]).unwrap(),
            json!(9)
        );
        assert_eq!(
            run(&max, None, vec![json!("a")]).unwrap_err(),
            "not an integer"
        );
    }
}
