//! The JSON data a CRUD API answers from: items found, removed and merged by JSON pointer.

use serde_json::{Map, Value};

/// `{"error": {"message": message}}`, as Dev Proxy writes errors.
pub(super) fn error_body(message: &str) -> Value {
    serde_json::json!({ "error": { "message": message } })
}

/// The value at the JSON pointer `pointer` into `items`.
pub(super) fn item_at<'a>(items: &'a mut [Value], pointer: &str) -> Option<&'a mut Value> {
    let (index, rest) = split_pointer(pointer)?;
    let item = items.get_mut(index)?;
    if rest.is_empty() {
        Some(item)
    } else {
        item.pointer_mut(rest)
    }
}

/// Removes the value at `pointer` from `items` (or from the item it is inside).
pub(super) fn remove_at(items: &mut Vec<Value>, pointer: &str) -> Option<()> {
    let (index, rest) = split_pointer(pointer)?;
    if rest.is_empty() {
        (index < items.len()).then(|| {
            items.remove(index);
        })
    } else {
        let (parent, last) = rest.rsplit_once('/')?;
        let last = last.replace("~1", "/").replace("~0", "~");
        match items.get_mut(index)?.pointer_mut(parent)? {
            Value::Object(map) => map.remove(&last).map(drop),
            Value::Array(list) => {
                let at: usize = last.parse().ok()?;
                (at < list.len()).then(|| {
                    list.remove(at);
                })
            }
            _ => None,
        }
    }
}

/// `/3/a/b` as `(3, "/a/b")`.
pub(super) fn split_pointer(pointer: &str) -> Option<(usize, &str)> {
    let rest = pointer.strip_prefix('/')?;
    let (first, rest) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    Some((first.parse().ok()?, rest))
}

/// Merges `update` into `item` as Json.NET's `Merge` does by default: objects merge key by
/// key, arrays are appended to, `null`s in `update` are ignored, anything else replaces.
pub(super) fn merge(item: &mut Value, update: Map<String, Value>) {
    let Value::Object(target) = item else {
        *item = Value::Object(update);
        return;
    };
    for (key, value) in update {
        match (target.get_mut(&key), value) {
            (_, Value::Null) => {}
            (Some(existing @ Value::Object(_)), Value::Object(inner)) => merge(existing, inner),
            (Some(Value::Array(existing)), Value::Array(more)) => existing.extend(more),
            (_, value) => {
                target.insert(key, value);
            }
        }
    }
}
