//! `h5mount inspect`: a deterministic tree listing of a file, in the spirit of `h5ls -r -v`.
//!
//! One line per link, depth-first in name order, with the object kind and, for datasets, dtype
//! (numpy-style), shape, max shape, layout, chunk shape and index, filters and fill value;
//! attributes follow their object, indented, with short values. An object reached again by
//! another hard link is listed as such and not descended into twice.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::model::value::{filters_text, shape_text};
use crate::model::{File, LinkTarget, ObjectId, ObjectKind, OpenOptions};

/// Attribute values longer than this are cut in the listing.
const MAX_VALUE_CHARS: usize = 60;

fn short(s: &str) -> String {
    let one_line = s.replace('\n', " ");
    if one_line.chars().count() > MAX_VALUE_CHARS {
        let cut: String = one_line.chars().take(MAX_VALUE_CHARS).collect();
        format!("{cut}...")
    } else {
        one_line
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// Marker for a reader that went away (`inspect | head`): the listing just stops.
const OUTPUT_CLOSED: &str = "output closed";

/// Write the listing of the file at `path` (starting at object path `start`, default `/`).
/// A closed output (broken pipe) ends the listing without an error.
pub fn inspect(path: &Path, start: Option<&str>, out: &mut dyn Write) -> Result<()> {
    let file = File::open(
        path,
        &OpenOptions {
            cache_bytes: 16 << 20,
            ..OpenOptions::default()
        },
    )?;
    inspect_file(&file, start, out)
}

/// Write the listing of the open `file`, as [`inspect`] does.
pub fn inspect_file(file: &Arc<File>, start: Option<&str>, out: &mut dyn Write) -> Result<()> {
    match list(file, start, out) {
        Err(Error::Invalid(m)) if m == OUTPUT_CLOSED => Ok(()),
        r => r,
    }
}

/// What an external link of `file` leads to: the object's kind (and a dataset's type and
/// shape), or why it is not followed.
fn followed(file: &Arc<File>, name: &str, path: &str) -> String {
    match file.follow_external(name, path) {
        Ok((target, id)) => match target.kind(id) {
            Ok(ObjectKind::Group) => "=> group".into(),
            Ok(ObjectKind::Dataset) => match target.dataset(id) {
                Ok(d) => format!(
                    "=> dataset {} {}",
                    d.info.dtype.numpy_str(),
                    shape_text(&d.info.shape)
                ),
                Err(e) => format!("=> dataset [error: {e}]"),
            },
            Ok(ObjectKind::NamedDatatype) => "=> datatype".into(),
            Ok(ObjectKind::Unknown) => "=> object".into(),
            Err(e) => format!("[not followed: {e}]"),
        },
        Err(e) => format!("[not followed: {e}]"),
    }
}

fn list(file: &Arc<File>, start: Option<&str>, out: &mut dyn Write) -> Result<()> {
    let start_path = start.unwrap_or("/").to_string();
    let start_id = file.resolve(&start_path)?;
    let mut seen: HashMap<ObjectId, String> = HashMap::new();
    // Entries still to print: an object to describe, or a finished line (non-hard links).
    let mut stack: Vec<(String, std::result::Result<ObjectId, String>)> =
        vec![(start_path, Ok(start_id))];
    let w = |out: &mut dyn Write, s: String| {
        writeln!(out, "{s}").map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => Error::Invalid(OUTPUT_CLOSED.into()),
            _ => Error::Invalid(format!("writing output: {e}")),
        })
    };
    while let Some((p, entry)) = stack.pop() {
        let id = match entry {
            Ok(id) => id,
            Err(line) => {
                w(out, line)?;
                continue;
            }
        };
        if let Some(first) = seen.get(&id) {
            w(out, format!("{p}  hard link to {first}"))?;
            continue;
        }
        seen.insert(id, p.clone());
        let kind = file.kind(id).map_err(|e| e.in_object(&p))?;
        match kind {
            ObjectKind::Group => w(out, format!("{p}  group"))?,
            ObjectKind::Dataset => match file.dataset(id) {
                Ok(d) => {
                    let i = &d.info;
                    let mut s = format!("{p}  dataset {}", i.dtype.numpy_str());
                    if i.null {
                        s.push_str(" null");
                    } else {
                        s.push(' ');
                        s.push_str(&shape_text(&i.shape));
                    }
                    if let Some(m) = &i.max_shape {
                        if m != &i.shape {
                            s.push_str(&format!(" max={}", shape_text(m)));
                        }
                    }
                    s.push(' ');
                    s.push_str(i.layout.name());
                    if let Some(c) = &i.chunk_shape {
                        s.push_str(&format!(" chunks={}", shape_text(c)));
                    }
                    if let Some(x) = i.chunk_index {
                        s.push_str(&format!(" index={x}"));
                    }
                    if !i.filters.is_empty() {
                        s.push_str(&format!(" filters={}", filters_text(&i.filters)));
                    }
                    if let Some(f) = &i.fill_value {
                        s.push_str(&format!(
                            " fill={}",
                            short(&crate::model::value::render_element(&i.dtype, f))
                        ));
                    }
                    if let Some(why) = d.unreadable_reason() {
                        s.push_str(&format!("  [unreadable: {why}]"));
                    }
                    w(out, s)?;
                }
                Err(e) => w(out, format!("{p}  dataset [error: {e}]"))?,
            },
            ObjectKind::NamedDatatype => {
                let dt = match file.named_datatype(id) {
                    Ok(t) => t.numpy_str(),
                    Err(e) => format!("[error: {e}]"),
                };
                w(out, format!("{p}  datatype {dt}"))?
            }
            ObjectKind::Unknown => w(out, format!("{p}  object"))?,
        }
        match file.attributes(id) {
            Ok(attrs) => {
                for a in attrs {
                    w(
                        out,
                        format!(
                            "    @{} {} = {}",
                            a.name,
                            a.dtype.numpy_str(),
                            short(&a.render())
                        ),
                    )?;
                }
            }
            Err(e) => w(out, format!("    @[error: {e}]"))?,
        }
        if kind == ObjectKind::Group {
            let links = file.links(id).map_err(|e| e.in_object(&p))?;
            let mut children = Vec::new();
            for l in links.iter() {
                let cp = join(&p, l.name);
                let entry = match &l.target {
                    LinkTarget::Hard(cid) => Ok(*cid),
                    LinkTarget::Soft(t) => Err(format!("{cp}  soft link -> {t}")),
                    LinkTarget::External { file: name, path } => Err(format!(
                        "{cp}  external link -> {name}::{path}  {}",
                        followed(file, name, path)
                    )),
                    LinkTarget::UserDefined(t) => Err(format!("{cp}  user-defined link type {t}")),
                };
                children.push((cp, entry));
            }
            // Depth-first in name order: push in reverse.
            stack.extend(children.into_iter().rev());
        }
    }
    Ok(())
}
