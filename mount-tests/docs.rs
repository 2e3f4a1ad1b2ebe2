//! The documentation's shape: `README.md` stays short (at most [`README_MAX_LINES`] lines),
//! and every relative link in `README.md` and `docs/*.md` names a file that exists, without
//! an anchor (headings get renamed; files are what a reader and this test can check).
//!
//! Links are Markdown inline links `[text](target)` and reference definitions
//! `[label]: target`; those inside fenced code blocks and code spans are not links. Targets
//! with a scheme (`https:`, `mailto:`) are not checked. No file is skipped: a page the README
//! links to must exist in the tree.

use std::fs;
use std::path::{Path, PathBuf};

/// The README is an introduction; reference detail belongs in `docs/`.
const README_MAX_LINES: usize = 150;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `README.md` and every `docs/*.md`, sorted.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let docs = root().join("docs");
    let mut more: Vec<PathBuf> = fs::read_dir(&docs)
        .unwrap_or_else(|e| panic!("{}: {e}", docs.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    more.sort();
    pages.extend(more);
    pages
}

/// The link targets of Markdown `text`, outside code, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(marker) = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m)) {
            fence = match fence {
                None => Some(marker),
                Some(open) if open == marker => None,
                open => open,
            };
            continue;
        }
        if fence.is_some() {
            continue;
        }
        let line = without_code_spans(line);
        // Reference definition: `[label]: target`.
        if let Some(rest) = line.trim_start().strip_prefix('[') {
            if let Some((_, def)) = rest.split_once("]:") {
                if let Some(target) = def.split_whitespace().next() {
                    out.push((i + 1, target.trim_matches(['<', '>']).to_string()));
                }
                continue;
            }
        }
        // Inline links: `](target)` or `](target "title")`.
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            let inner = &rest[..end];
            // `<target with spaces>`, else the target ends at the first space (a title follows).
            let target = match inner.strip_prefix('<') {
                Some(quoted) => quoted.split('>').next().unwrap_or(""),
                None => inner.split_whitespace().next().unwrap_or(""),
            };
            out.push((i + 1, target.to_string()));
            rest = &rest[end..];
        }
    }
    out
}

/// `line` with the contents of its backtick code spans removed.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// Whether `target` names something outside the tree (a URL or an e-mail address).
fn has_scheme(target: &str) -> bool {
    match target.split_once(':') {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

/// What is wrong with the link `target` of the page in `dir`, if anything.
fn problem(dir: &Path, target: &str) -> Option<String> {
    if target.is_empty() {
        return Some("empty link".into());
    }
    if has_scheme(target) {
        return None;
    }
    if target.contains('#') {
        return Some("has an anchor; link to the file only".into());
    }
    if target.starts_with('/') {
        return Some("is absolute; links are relative to the page".into());
    }
    let path = dir.join(target);
    (!path.exists()).then(|| format!("names {}, which does not exist", path.display()))
}

#[test]
fn readme_is_short() {
    let path = root().join("README.md");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let n = text.lines().count();
    assert!(
        n <= README_MAX_LINES,
        "README.md has {n} lines, more than {README_MAX_LINES}: move the detail into docs/"
    );
}

#[test]
fn relative_links_name_existing_files() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        let dir = page.parent().unwrap();
        for (line, target) in links(&text) {
            checked += 1;
            if let Some(why) = problem(dir, &target) {
                bad.push(format!("{}:{line}: ({target}) {why}", page.display()));
            }
        }
    }
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
    assert!(checked > 0, "no links found: the link scanner is broken");
}

/// The scanner finds inline and reference links, and not what is code.
#[test]
fn scanner_finds_links_outside_code() {
    let text = "See [a](docs/a.md) and [b](b.md \"title\").\n\
                `[not](code.md)` but [c](<c d.md>)\n\
                ```\n[fenced](no.md)\n```\n\
                [ref]: r.md\n\
                [web](https://example.org/x#y)\n";
    let found: Vec<String> = links(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(
        found,
        [
            "docs/a.md",
            "b.md",
            "c d.md",
            "r.md",
            "https://example.org/x#y"
        ]
    );
}

/// A missing file, an anchor and an absolute path are each refused; URLs are not checked.
#[test]
fn problems_are_found() {
    let dir = root();
    assert_eq!(problem(&dir, "README.md"), None);
    assert_eq!(problem(&dir, "https://example.org/#x"), None);
    assert!(problem(&dir, "no-such-page.md").is_some());
    assert!(problem(&dir, "README.md#install").is_some());
    assert!(problem(&dir, "#install").is_some());
    assert!(problem(&dir, "/etc/fstab").is_some());
    assert!(problem(&dir, "").is_some());
}
