//! Text renderings of values the way numpy's `str()` prints them: scalars as Python reprs
//! (`1.5`, `1e-05`, `True`, `b'abc'` → `abc` for strings), arrays in brackets with nested rows
//! on new lines. Used for xattrs and `inspect`.

use crate::format::messages::datatype::{ByteOrder, Datatype, ReferenceKind, StringPad, TypeClass};
use crate::format::messages::filter_pipeline::FilterSpec;

/// Python's `repr` of a float given Rust's shortest round-trip scientific form (`{:e}`).
fn py_float(sci: &str) -> String {
    match sci {
        "NaN" => return "nan".into(),
        "inf" => return "inf".into(),
        "-inf" => return "-inf".into(),
        _ => {}
    }
    let (neg, body) = match sci.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, sci),
    };
    let (mant, exp) = body.split_once('e').unwrap_or((body, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp < 0 {
            s.push_str("0.");
            for _ in 0..(-exp - 1) {
                s.push('0');
            }
            s.push_str(&digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                s.push_str(&digits);
                for _ in digits.len()..int_len {
                    s.push('0');
                }
                s.push_str(".0");
            } else {
                s.push_str(&digits[..int_len]);
                s.push('.');
                s.push_str(&digits[int_len..]);
            }
        }
    } else {
        s.push_str(&digits[..1]);
        if digits.len() > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        s.push_str(&format!(
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        ));
    }
    s
}

fn uint_of(bytes: &[u8], order: ByteOrder) -> u128 {
    let mut v: u128 = 0;
    match order {
        ByteOrder::Big => {
            for &b in bytes.iter().take(16) {
                v = (v << 8) | b as u128;
            }
        }
        _ => {
            for &b in bytes.iter().take(16).rev() {
                v = (v << 8) | b as u128;
            }
        }
    }
    v
}

fn half_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as f64;
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        e => sign * (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

/// Render one element of type `t` from `bytes` (exactly `t.size` bytes).
pub fn render_element(t: &Datatype, bytes: &[u8]) -> String {
    match &t.class {
        TypeClass::FixedPoint { order, signed, .. } => {
            let v = uint_of(bytes, *order);
            let bits = (bytes.len().min(16) * 8) as u32;
            if *signed && bits > 0 && bits < 128 && v >> (bits - 1) & 1 == 1 {
                format!("{}", v as i128 - (1i128 << bits))
            } else {
                format!("{v}")
            }
        }
        TypeClass::Bitfield { order, .. } => format!("{}", uint_of(bytes, *order)),
        TypeClass::FloatingPoint { order, .. } => {
            let v = uint_of(bytes, *order);
            match bytes.len() {
                2 => py_float(&format!("{:e}", half_to_f64(v as u16) as f32)),
                4 => py_float(&format!("{:e}", f32::from_bits(v as u32))),
                8 => py_float(&format!("{:e}", f64::from_bits(v as u64))),
                _ => hex(bytes),
            }
        }
        TypeClass::Complex { base } => {
            let half = bytes.len() / 2;
            complex(
                &render_element(base, &bytes[..half]),
                &render_element(base, &bytes[half..]),
            )
        }
        TypeClass::String { pad, .. } => fixed_string(bytes, *pad),
        TypeClass::Opaque { .. } => {
            // numpy shows void scalars as bytes with every byte escaped.
            let esc: String = bytes.iter().map(|b| format!("\\x{b:02X}")).collect();
            format!("b'{esc}'")
        }
        TypeClass::Reference { kind } => match kind {
            ReferenceKind::Region => "<HDF5 region reference>".into(),
            _ => "<HDF5 object reference>".into(),
        },
        TypeClass::Enum { base, members } => {
            if is_h5py_bool(t) {
                let v = bytes.iter().any(|&b| b != 0);
                return if v { "True" } else { "False" }.into();
            }
            let _ = members;
            render_element(base, bytes)
        }
        TypeClass::Compound { members } => {
            let parts: Vec<String> = members
                .iter()
                .map(|m| {
                    let start = m.offset as usize;
                    let end = start + m.dtype.size as usize;
                    match (bytes.get(start..end), &m.dtype.class) {
                        (Some(b), TypeClass::String { pad, .. }) => py_bytes(b, *pad),
                        (Some(b), _) => render_element(&m.dtype, b),
                        (None, _) => "?".into(),
                    }
                })
                .collect();
            // h5py reads a compound of two equal floats named r and i as numpy complex.
            let np = t.numpy_str();
            if parts.len() == 2 && (np.starts_with("<c") || np.starts_with(">c")) {
                return complex(&parts[0], &parts[1]);
            }
            format!("({})", parts.join(", "))
        }
        TypeClass::Array { dims, base } => {
            let shape: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
            render_array(base, &shape, bytes)
        }
        _ => hex(bytes),
    }
}

/// Is this h5py's boolean (an enum of a 1-byte integer with FALSE = 0 and TRUE = 1)?
pub fn is_h5py_bool(t: &Datatype) -> bool {
    match &t.class {
        TypeClass::Enum { base, members } => {
            base.size == 1
                && members.len() == 2
                && members[0].0 == "FALSE"
                && members[1].0 == "TRUE"
        }
        _ => false,
    }
}

fn fixed_string(bytes: &[u8], pad: StringPad) -> String {
    let s = match pad {
        StringPad::SpacePad => {
            let end = bytes.iter().rposition(|&b| b != b' ').map_or(0, |p| p + 1);
            &bytes[..end]
        }
        _ => {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            &bytes[..end]
        }
    };
    String::from_utf8_lossy(s).into_owned()
}

/// Python's repr of a complex number from the reprs of its parts: `(1+2j)`, `(-3.5-0.25j)`.
fn complex(re: &str, im: &str) -> String {
    let re = re.strip_suffix(".0").unwrap_or(re);
    let im = im.strip_suffix(".0").unwrap_or(im);
    if im.starts_with('-') {
        format!("({re}{im}j)")
    } else {
        format!("({re}+{im}j)")
    }
}

/// Python's repr of a fixed-length bytes value as numpy holds it (trailing NULs dropped),
/// e.g. `b'caf\xc3\xa9'`.
fn py_bytes(bytes: &[u8], pad: StringPad) -> String {
    let end = match pad {
        StringPad::SpacePad => bytes.iter().rposition(|&b| b != b' ' && b != 0),
        _ => bytes.iter().rposition(|&b| b != 0),
    }
    .map_or(0, |p| p + 1);
    let mut s = String::from("b'");
    for &b in &bytes[..end] {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'\'' => s.push_str("\\'"),
            b'\t' => s.push_str("\\t"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('\'');
    s
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn nest(shape: &[u64], items: &[String], depth: usize) -> String {
    if shape.is_empty() {
        return items.first().cloned().unwrap_or_default();
    }
    let n = shape[0] as usize;
    if shape.len() == 1 {
        return format!("[{}]", items.join(" "));
    }
    let stride = items.len().checked_div(n).unwrap_or(0);
    let sep = format!("\n{}", " ".repeat(depth + 1));
    let rows: Vec<String> = (0..n)
        .map(|i| nest(&shape[1..], &items[i * stride..(i + 1) * stride], depth + 1))
        .collect();
    format!("[{}]", rows.join(&sep))
}

/// Render an array (or scalar, when `shape` is empty) of fixed-size elements.
pub fn render_array(t: &Datatype, shape: &[u64], raw: &[u8]) -> String {
    let size = t.size as usize;
    if size == 0 {
        return String::new();
    }
    let items: Vec<String> = match &t.class {
        // In arrays numpy shows fixed strings as bytes reprs; a scalar is shown as its text.
        TypeClass::String { pad, .. } if !shape.is_empty() => {
            raw.chunks_exact(size).map(|e| py_bytes(e, *pad)).collect()
        }
        _ => raw
            .chunks_exact(size)
            .map(|e| render_element(t, e))
            .collect(),
    };
    nest(shape, &items, 0)
}

/// Render strings: a scalar as itself, arrays numpy-style with quotes.
pub fn render_strings(shape: &[u64], items: &[String]) -> String {
    if shape.is_empty() {
        return items.first().cloned().unwrap_or_default();
    }
    let quoted: Vec<String> = items.iter().map(|s| format!("'{s}'")).collect();
    nest(shape, &quoted, 0)
}

/// A shape as a Python tuple: `()`, `(5,)`, `(3, 4)`; `u64::MAX` (unlimited) is `None`.
pub fn shape_text(dims: &[u64]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|&d| {
            if d == u64::MAX {
                "None".to_string()
            } else {
                d.to_string()
            }
        })
        .collect();
    match parts.len() {
        1 => format!("({},)", parts[0]),
        _ => format!("({})", parts.join(", ")),
    }
}

/// A filter pipeline as `name(cd,...)` items joined by commas. Shuffle and Fletcher32 client
/// data are set by the library (element size), not chosen by the user, and are left out.
pub fn filters_text(specs: &[FilterSpec]) -> String {
    specs
        .iter()
        .map(|f| {
            let known = crate::filters::filter_name(f.id);
            let name = match (known, &f.name) {
                ("unknown", Some(n)) if !n.is_empty() => n.clone(),
                ("unknown", _) => format!("filter{}", f.id),
                (k, _) => k.to_string(),
            };
            if f.client_data.is_empty() || f.id == 2 || f.id == 3 {
                name
            } else {
                let cd: Vec<String> = f.client_data.iter().map(|c| c.to_string()).collect();
                format!("{name}({})", cd.join(","))
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::py_float;

    #[test]
    fn python_float_repr() {
        let f = |x: f64| py_float(&format!("{x:e}"));
        assert_eq!(f(1.0), "1.0");
        assert_eq!(f(0.1), "0.1");
        assert_eq!(f(1e-5), "1e-05");
        assert_eq!(f(1e16), "1e+16");
        assert_eq!(f(123.456), "123.456");
        assert_eq!(f(-2.5e-3), "-0.0025");
        assert_eq!(f(f64::NAN), "nan");
        assert_eq!(py_float(&format!("{:e}", 0.1f32)), "0.1");
    }
}
