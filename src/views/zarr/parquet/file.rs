//! One Parquet file of kerchunk's reference layout, written by hand: the four columns
//! fsspec's `LazyReferenceMapper` reads, one row per chunk key.
//!
//! | column   | Parquet type                  | holds                                   |
//! |----------|-------------------------------|-----------------------------------------|
//! | `path`   | optional BYTE_ARRAY (String)  | the URL, null where inline or missing   |
//! | `offset` | required INT64                | the reference's offset, else 0          |
//! | `size`   | required INT64                | the reference's length, else 0          |
//! | `raw`    | optional BYTE_ARRAY           | the chunk's bytes where inline, else null |
//!
//! The file is the smallest valid form (Parquet format specification, `parquet.thrift`):
//! `PAR1`, one row group whose column chunks are version-1 data pages compressed with
//! zstd (as kerchunk writes them; libzstd is linked already for the zstd filter), the
//! footer (`FileMetaData`, Thrift compact), its length and `PAR1`. Values are PLAIN
//! (BYTE_ARRAY: 4-byte little-endian length and bytes; INT64: 8 bytes little-endian),
//! except `path`, whose one URL is a dictionary page of one entry and pages of indices
//! (all 0: one RLE run), so a URL costs nothing per row. Definition levels (1 present, 0
//! null) are RLE runs, behind their 4-byte length. Pages hold about [`PAGE_BYTES`] of values
//! each, so that no page's size nears the format's 32-bit limit. Statistics are null counts
//! only; no index pages.

use super::thrift::Writer;

/// A row: one chunk key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Row<'a> {
    /// No chunk (fill value): null everywhere.
    Missing,
    /// `[url, offset, len]`.
    Ref { offset: u64, len: u64 },
    /// The chunk's bytes.
    Raw(&'a [u8]),
}

/// Values per page, roughly: a page is closed once its values pass this.
const PAGE_BYTES: usize = 1 << 20;

/// The largest inline value: a page holding it must stay below 2 GiB.
const MAX_RAW: usize = 1 << 30;

/// zstd level of the pages (speed first: the references are small and regular).
const ZSTD_LEVEL: i32 = 1;

/// `parquet.thrift` enum values used here.
mod pq {
    pub const INT64: i32 = 2;
    pub const BYTE_ARRAY: i32 = 6;
    pub const REQUIRED: i32 = 0;
    pub const OPTIONAL: i32 = 1;
    pub const UTF8: i32 = 0;
    pub const PLAIN: i32 = 0;
    pub const RLE: i32 = 3;
    pub const RLE_DICTIONARY: i32 = 8;
    pub const ZSTD: i32 = 6;
    pub const DATA_PAGE: i32 = 0;
    pub const DICTIONARY_PAGE: i32 = 2;
}

/// Where a column chunk's pages went, for its footer entry.
struct Chunk {
    start: u64,
    dictionary: Option<u64>,
    data: u64,
    compressed: u64,
    uncompressed: u64,
    encodings: Vec<i32>,
    nulls: u64,
}

/// The bytes of the Parquet file holding `rows` (every reference naming `url`).
pub fn write(url: &str, rows: &[Row]) -> Result<Vec<u8>, String> {
    if let Some(big) = rows.iter().find_map(|r| match r {
        Row::Raw(b) if b.len() > MAX_RAW => Some(b.len()),
        _ => None,
    }) {
        return Err(format!(
            "an inline chunk of {big} bytes is too large for a Parquet page"
        ));
    }
    let mut out = b"PAR1".to_vec();
    let has_url = rows.iter().any(|r| matches!(r, Row::Ref { .. }));
    let path = column(
        &mut out,
        rows,
        true,
        |r| match r {
            Row::Ref { .. } if has_url => Some(Value::Index),
            _ => None,
        },
        has_url.then_some(url),
    )?;
    let offset = column(
        &mut out,
        rows,
        false,
        |r| match *r {
            Row::Ref { offset, .. } => Some(Value::I64(offset)),
            _ => Some(Value::I64(0)),
        },
        None,
    )?;
    let size = column(
        &mut out,
        rows,
        false,
        |r| match *r {
            Row::Ref { len, .. } => Some(Value::I64(len)),
            _ => Some(Value::I64(0)),
        },
        None,
    )?;
    let raw = column(
        &mut out,
        rows,
        true,
        |r| match *r {
            Row::Raw(b) => Some(Value::Bytes(b)),
            _ => None,
        },
        None,
    )?;
    let footer = footer(rows.len(), [path, offset, size, raw]);
    out.extend_from_slice(&footer);
    let len = u32::try_from(footer.len()).map_err(|_| "the Parquet footer is too large")?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(b"PAR1");
    Ok(out)
}

/// One value of a column.
enum Value<'a> {
    I64(u64),
    Bytes(&'a [u8]),
    /// Index 0 of the column's dictionary.
    Index,
}

/// Append the pages of one column (its value of each row by `value`, `None` for null;
/// `optional` says whether it has definition levels; `dictionary`, the one entry of its
/// dictionary if it has one).
fn column<'a>(
    out: &mut Vec<u8>,
    rows: &[Row<'a>],
    optional: bool,
    value: impl Fn(&Row<'a>) -> Option<Value<'a>>,
    dictionary: Option<&str>,
) -> Result<Chunk, String> {
    let start = out.len() as u64;
    let mut uncompressed = 0;
    let mut nulls = 0;
    let dictionary_at = match dictionary {
        Some(url) => {
            let mut plain = Vec::new();
            plain_bytes(&mut plain, url.as_bytes());
            uncompressed += page(
                out,
                &plain,
                |w| {
                    w.begin(7); // dictionary_page_header
                    w.i32(1, 1); // num_values
                    w.i32(2, pq::PLAIN);
                    w.end();
                },
                pq::DICTIONARY_PAGE,
            )?;
            Some(start)
        }
        None => None,
    };
    let data = out.len() as u64;
    let mut first = 0;
    while first < rows.len() {
        // The rows of this page: until its values pass PAGE_BYTES.
        let (mut end, mut bytes) = (first, 0);
        let mut levels = Vec::new();
        let mut values = Vec::new();
        let mut present = 0u64;
        while end < rows.len() && bytes < PAGE_BYTES {
            let v = value(&rows[end]);
            levels.push(v.is_some());
            match v {
                Some(Value::I64(x)) => values.extend_from_slice(&x.to_le_bytes()),
                Some(Value::Bytes(b)) => plain_bytes(&mut values, b),
                Some(Value::Index) => present += 1,
                None => nulls += 1,
            }
            bytes = values.len();
            end += 1;
        }
        let mut body = Vec::new();
        if optional {
            let runs = rle_levels(&levels);
            let n = u32::try_from(runs.len()).map_err(|_| "definition levels too long")?;
            body.extend_from_slice(&n.to_le_bytes());
            body.extend_from_slice(&runs);
        }
        if dictionary.is_some() {
            // Bit width 1, then one RLE run of index 0 over the present values.
            body.push(1);
            if present > 0 {
                varint(&mut body, present << 1);
                body.push(0);
            }
        } else {
            body.extend_from_slice(&values);
        }
        let n = i32::try_from(end - first).map_err(|_| "too many rows in a page")?;
        let encoding = if dictionary.is_some() {
            pq::RLE_DICTIONARY
        } else {
            pq::PLAIN
        };
        uncompressed += page(
            out,
            &body,
            |w| {
                w.begin(5); // data_page_header
                w.i32(1, n); // num_values, nulls included
                w.i32(2, encoding);
                w.i32(3, pq::RLE); // definition levels
                w.i32(4, pq::RLE); // repetition levels (none)
                w.end();
            },
            pq::DATA_PAGE,
        )?;
        first = end;
    }
    let size = out.len() as u64 - start;
    let mut encodings = vec![pq::PLAIN];
    if optional {
        encodings.push(pq::RLE);
    }
    if dictionary.is_some() {
        encodings.push(pq::RLE_DICTIONARY);
    }
    Ok(Chunk {
        start,
        dictionary: dictionary_at,
        data,
        compressed: size,
        uncompressed,
        encodings,
        nulls,
    })
}

/// Append one page: its header (type `kind`, sizes, and the fields `fields` writes) and
/// `body` compressed; its size uncompressed (header and body).
fn page(
    out: &mut Vec<u8>,
    body: &[u8],
    fields: impl FnOnce(&mut Writer),
    kind: i32,
) -> Result<u64, String> {
    let packed = ::zstd::bulk::compress(body, ZSTD_LEVEL).map_err(|e| format!("zstd: {e}"))?;
    let too_large = |_| "a Parquet page is too large".to_string();
    let mut w = Writer::new();
    w.i32(1, kind);
    w.i32(2, i32::try_from(body.len()).map_err(too_large)?);
    w.i32(3, i32::try_from(packed.len()).map_err(too_large)?);
    fields(&mut w);
    let header = w.finish();
    out.extend_from_slice(&header);
    out.extend_from_slice(&packed);
    Ok((header.len() + body.len()) as u64)
}

/// A BYTE_ARRAY value, PLAIN: its length (4 bytes, little-endian) and bytes. (Lengths are
/// below [`MAX_RAW`], checked by [`write`]; a URL is short.)
fn plain_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// Definition levels of bit width 1 as RLE runs: for each run, varint(length << 1) and
/// the level in one byte.
fn rle_levels(levels: &[bool]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < levels.len() {
        let run = levels[i..].iter().take_while(|&&l| l == levels[i]).count();
        varint(&mut out, (run as u64) << 1);
        out.push(u8::from(levels[i]));
        i += run;
    }
    out
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The footer: `FileMetaData` of one row group of `rows` rows and the four column chunks.
fn footer(rows: usize, chunks: [Chunk; 4]) -> Vec<u8> {
    // (name, physical type, repetition, UTF8 string?)
    const SCHEMA: [(&str, i32, i32, bool); 4] = [
        ("path", pq::BYTE_ARRAY, pq::OPTIONAL, true),
        ("offset", pq::INT64, pq::REQUIRED, false),
        ("size", pq::INT64, pq::REQUIRED, false),
        ("raw", pq::BYTE_ARRAY, pq::OPTIONAL, false),
    ];
    let rows = rows as i64;
    let mut w = Writer::new();
    w.i32(1, 1); // version
    w.list_struct(2, 5, |w, i| {
        if i == 0 {
            w.binary(4, b"schema"); // the root: a group of the four columns
            w.i32(5, 4);
            return;
        }
        let (name, ty, rep, utf8) = SCHEMA[i - 1];
        w.i32(1, ty);
        w.i32(3, rep);
        w.binary(4, name.as_bytes());
        if utf8 {
            w.i32(6, pq::UTF8); // converted_type
            w.begin(10); // logicalType: STRING (an empty struct)
            w.begin(1);
            w.end();
            w.end();
        }
    });
    w.i64(3, rows);
    let total: u64 = chunks.iter().map(|c| c.uncompressed).sum();
    w.list_struct(4, 1, |w, _| {
        w.list_struct(1, 4, |w, i| {
            let c = &chunks[i];
            let (name, ty, _, _) = SCHEMA[i];
            w.i64(2, c.start as i64); // file_offset
            w.begin(3); // meta_data
            w.i32(1, ty);
            w.list_i32(2, &c.encodings);
            w.list_binary(3, &[name.as_bytes()]);
            w.i32(4, pq::ZSTD);
            w.i64(5, rows);
            w.i64(6, c.uncompressed as i64);
            w.i64(7, c.compressed as i64);
            w.i64(9, c.data as i64);
            if let Some(d) = c.dictionary {
                w.i64(11, d as i64);
            }
            // Statistics: the null count alone. fastparquet, with no statistics, takes an
            // INT64 column for one with nulls (even a required one) and reads floats.
            w.begin(12);
            w.i64(3, c.nulls as i64);
            w.end();
            w.end();
        });
        w.i64(2, total as i64);
        w.i64(3, rows);
    });
    w.binary(
        6,
        concat!("h5mount version ", env!("CARGO_PKG_VERSION")).as_bytes(),
    );
    w.finish()
}
