//! Attributes as JSON: every HDF5 attribute of a dataset or group, for v3 `attributes` and
//! v2 `.zattrs`.
//!
//! A scalar attribute is one JSON value, an array attribute nested JSON arrays of its shape,
//! an attribute with a null dataspace (h5py's `Empty`) `null`. Values: integers (every width
//! up to 64 bits, time and bitfields included) as JSON integers, wider ones as decimal
//! strings; IEEE floats as numbers, NaN and infinities as the strings `"NaN"`, `"Infinity"`
//! and `"-Infinity"` (the convention the Zarr specifications use for fill values); strings
//! (fixed or variable length) as UTF-8 text, invalid bytes replaced; h5py's booleans as
//! `true`/`false`, other enums as their integer value; complex numbers as `[re, im]`;
//! compounds as objects of their members; array types as nested arrays; variable-length
//! sequences as arrays. Values JSON cannot hold are described by a string, as the xattrs
//! show them: references as `"<HDF5 object reference>"`, opaque bytes as `"b'\x01...'"`, a
//! non-IEEE float as its bytes in hex. An attribute that cannot be read at all is kept as
//! `"<unreadable attribute: why>"`, with one log line: none is dropped silently.

use serde_json::{json, Map, Value};

use super::dtype::{float_json, half_to_f64};
use crate::format::messages::datatype::{ByteOrder, Datatype, StringPad, TypeClass, VarLenKind};
use crate::model::value::{is_h5py_bool, render_element};
use crate::model::{AttrResult, Attribute, File, ObjectId};
use crate::views::vlen::{parse_ref, HeapCache};

/// Most elements of one attribute rendered as JSON: beyond it the value is described, so
/// that a huge attribute cannot blow up a metadata document.
const MAX_ELEMENTS: usize = 1 << 20;

/// The attributes `results` of object `id` of `file` (as [`File::attribute_results`] gives
/// them) as a JSON object (keys sorted, as serde_json keeps them), leaving out those `hidden` says the mapping
/// shows in another form.
pub fn attributes(
    file: &File,
    id: ObjectId,
    results: Vec<AttrResult>,
    hidden: &dyn Fn(&Attribute) -> bool,
) -> Map<String, Value> {
    let mut out = Map::new();
    let heaps = HeapCache::default();
    for r in results {
        match r {
            Ok(a) if hidden(&a) => {}
            Ok(a) => {
                let v = value(file, &heaps, &a);
                out.insert(a.name, v);
            }
            Err(refused) => {
                log::warn!(
                    "Zarr attributes of object {:#x}: attribute {:?}: {}",
                    id.0,
                    refused.name,
                    refused.error
                );
                out.insert(
                    refused.name,
                    json!(format!("<unreadable attribute: {}>", refused.error)),
                );
            }
        }
    }
    out
}

/// A `_FillValue` attribute (JSON `v`) of an array of v3 data type `data_type`, as xarray
/// reads it from a Zarr store: one value, not an array of one (netCDF stores attributes as
/// arrays; its readers show one element as a scalar), and in Zarr v3, on a float array,
/// xarray's own encoding: base64 of the value as a little-endian double (xarray decodes the
/// attribute that way, and fails on a plain number). Anything else stays as it is.
pub fn fill_value_attr(v: &Value, data_type: &Value, v3: bool) -> Value {
    let one = match v {
        Value::Array(a) if a.len() == 1 => &a[0],
        other => other,
    };
    let float = matches!(data_type.as_str(), Some("float16" | "float32" | "float64"));
    if !(v3 && float) {
        return one.clone();
    }
    let x = match one {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    };
    match x {
        Some(x) => json!(super::dtype::base64(&x.to_le_bytes())),
        None => one.clone(),
    }
}

/// The value of attribute `a` as JSON (see the module docs).
pub fn value(file: &File, heaps: &HeapCache, a: &Attribute) -> Value {
    let Some(shape) = &a.shape else {
        return Value::Null;
    };
    let items: Vec<Value> = if let Some(strings) = &a.strings {
        strings
            .iter()
            .map(|s| json!(s.as_deref().unwrap_or("")))
            .collect()
    } else {
        let size = a.dtype.size as usize;
        if size == 0 {
            return Value::Null;
        }
        let n = a.raw.len() / size;
        if n > MAX_ELEMENTS {
            return json!(format!(
                "<attribute of {n} elements, more than {MAX_ELEMENTS} shown as JSON>"
            ));
        }
        a.raw
            .chunks_exact(size)
            .map(|b| element(file, heaps, &a.dtype, b))
            .collect()
    };
    nest(shape, items)
}

/// `items` (in C order) nested as arrays of `shape`; a scalar's one item as it is.
fn nest(shape: &[u64], items: Vec<Value>) -> Value {
    let Some((&d, rest)) = shape.split_first() else {
        return items.into_iter().next().unwrap_or(Value::Null);
    };
    if rest.is_empty() {
        return Value::Array(items);
    }
    let inner: u64 = rest.iter().product();
    let d = usize::try_from(d).unwrap_or(0);
    let mut it = items.into_iter();
    let mut rows = Vec::with_capacity(d.min(MAX_ELEMENTS));
    for _ in 0..d {
        let row: Vec<Value> = it.by_ref().take(inner as usize).collect();
        rows.push(nest(rest, row));
    }
    Value::Array(rows)
}

/// An unsigned integer from `b` in byte order `order` (at most 8 bytes).
fn word(b: &[u8], order: ByteOrder) -> u64 {
    let mut v = 0u64;
    let mut push = |x: u8| v = (v << 8) | u64::from(x);
    match order {
        ByteOrder::Big => b.iter().for_each(|&x| push(x)),
        _ => b.iter().rev().for_each(|&x| push(x)),
    }
    v
}

/// One element of type `t` (its `t.size` bytes `b`) as JSON.
pub fn element(file: &File, heaps: &HeapCache, t: &Datatype, b: &[u8]) -> Value {
    let described = || json!(render_element(t, b));
    match &t.class {
        TypeClass::FixedPoint { order, signed, .. } if b.len() <= 8 && !b.is_empty() => {
            let v = word(b, *order);
            if *signed {
                let shift = 64 - 8 * b.len() as u32;
                json!(((v << shift) as i64) >> shift)
            } else {
                json!(v)
            }
        }
        TypeClass::Bitfield { order, .. } | TypeClass::Time { order, .. }
            if b.len() <= 8 && !b.is_empty() =>
        {
            json!(word(b, *order))
        }
        TypeClass::FixedPoint { .. } | TypeClass::Bitfield { .. } | TypeClass::Time { .. } => {
            json!(render_element(t, b))
        }
        TypeClass::FloatingPoint {
            order,
            exponent_size,
            mantissa_size,
            ..
        } => match (b.len(), exponent_size, mantissa_size, order) {
            (_, _, _, ByteOrder::Vax) => described(),
            (2, 5, 10, o) => float_json(half_to_f64(word(b, *o) as u16)),
            (4, 8, 23, o) => float_json(f64::from(f32::from_bits(word(b, *o) as u32))),
            (8, 11, 52, o) => float_json(f64::from_bits(word(b, *o))),
            _ => described(),
        },
        TypeClass::Complex { base } => {
            let h = b.len() / 2;
            json!([
                element(file, heaps, base, &b[..h]),
                element(file, heaps, base, &b[h..])
            ])
        }
        TypeClass::String { pad, .. } => json!(fixed_string(b, *pad)),
        TypeClass::Enum { base, .. } => {
            if is_h5py_bool(t) {
                json!(b.iter().any(|&x| x != 0))
            } else {
                element(file, heaps, base, b)
            }
        }
        TypeClass::Compound { members } => {
            let np = t.numpy_str();
            let complex = np.starts_with("<c") || np.starts_with(">c");
            let mut obj = Map::new();
            let mut parts = Vec::new();
            for m in members {
                let start = m.offset as usize;
                let v = match b.get(start..start.saturating_add(m.dtype.size as usize)) {
                    Some(mb) => element(file, heaps, &m.dtype, mb),
                    None => Value::Null,
                };
                parts.push(v.clone());
                obj.insert(m.name.clone(), v);
            }
            if complex && parts.len() == 2 {
                Value::Array(parts)
            } else {
                Value::Object(obj)
            }
        }
        TypeClass::Array { dims, base } => {
            let size = base.size as usize;
            if size == 0 {
                return Value::Array(Vec::new());
            }
            let items = b
                .chunks_exact(size)
                .map(|e| element(file, heaps, base, e))
                .collect();
            let shape: Vec<u64> = dims.iter().map(|&d| u64::from(d)).collect();
            nest(&shape, items)
        }
        TypeClass::VarLen { kind, base } => vlen(file, heaps, *kind, base, b),
        TypeClass::Opaque { .. } | TypeClass::Reference { .. } => described(),
    }
}

/// A variable-length element (its stored reference `b`): a string, or an array of `base`.
fn vlen(file: &File, heaps: &HeapCache, kind: VarLenKind, base: &Datatype, b: &[u8]) -> Value {
    let fetch = |expected: u64| -> std::result::Result<Option<Vec<u8>>, String> {
        let r = parse_ref(file, b).map_err(|e| e.to_string())?;
        match r.id {
            None => Ok(None),
            Some(id) => heaps
                .object(file, id, expected.saturating_mul(u64::from(r.len)))
                .map(Some)
                .map_err(|e| e.to_string()),
        }
    };
    let unreadable = |e: String| json!(format!("<unreadable value: {e}>"));
    match kind {
        VarLenKind::String { pad, .. } => match fetch(1) {
            Ok(Some(bytes)) => json!(fixed_string(&bytes, pad)),
            Ok(None) => json!(""),
            Err(e) => unreadable(e),
        },
        VarLenKind::Sequence => {
            let size = base.size as usize;
            match fetch(base.size.into()) {
                Ok(Some(bytes)) if size > 0 => Value::Array(
                    bytes
                        .chunks_exact(size)
                        .take(MAX_ELEMENTS)
                        .map(|e| element(file, heaps, base, e))
                        .collect(),
                ),
                Ok(_) => Value::Array(Vec::new()),
                Err(e) => unreadable(e),
            }
        }
    }
}

/// A fixed-size string's text: up to its first NUL (null-terminated), without its trailing
/// NULs (null-padded, as numpy reads it) or spaces (space-padded, as libhdf5 converts it).
fn fixed_string(b: &[u8], pad: StringPad) -> String {
    let end = match pad {
        StringPad::NullTerminate => b.iter().position(|&x| x == 0).unwrap_or(b.len()),
        StringPad::NullPad => b.iter().rposition(|&x| x != 0).map_or(0, |p| p + 1),
        StringPad::SpacePad => b
            .iter()
            .rposition(|&x| x != b' ' && x != 0)
            .map_or(0, |p| p + 1),
    };
    String::from_utf8_lossy(&b[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_follows_the_shape() {
        let items: Vec<Value> = (0..6).map(|i| json!(i)).collect();
        assert_eq!(nest(&[2, 3], items.clone()), json!([[0, 1, 2], [3, 4, 5]]));
        assert_eq!(nest(&[6], items.clone()), json!([0, 1, 2, 3, 4, 5]));
        assert_eq!(nest(&[], items), json!(0));
        assert_eq!(nest(&[0, 3], Vec::new()), json!([]));
    }

    #[test]
    fn fill_value_attributes_as_xarray_reads_them() {
        let f32 = json!("float32");
        assert_eq!(
            fill_value_attr(&json!([-999.0]), &f32, false),
            json!(-999.0)
        );
        assert_eq!(
            fill_value_attr(&json!([-999.0]), &f32, true),
            json!("AAAAAAA4j8A=")
        );
        assert_eq!(
            fill_value_attr(&json!("NaN"), &f32, true),
            json!("AAAAAAAA+H8=")
        );
        assert_eq!(
            fill_value_attr(&json!([-99]), &json!("int16"), true),
            json!(-99)
        );
        assert_eq!(
            fill_value_attr(&json!([1, 2]), &json!("int16"), true),
            json!([1, 2])
        );
    }

    #[test]
    fn strings_by_padding() {
        assert_eq!(fixed_string(b"ab\0c\0\0", StringPad::NullPad), "ab\0c");
        assert_eq!(fixed_string(b"ab\0c\0\0", StringPad::NullTerminate), "ab");
        assert_eq!(fixed_string(b"ab  ", StringPad::SpacePad), "ab");
        assert_eq!(fixed_string(b"caf\xc3\xa9", StringPad::NullPad), "café");
    }
}
