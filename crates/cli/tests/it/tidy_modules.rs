//! No circles between files: in every crate, the binary's too, the files'
//! imports form no cycle, so each file can be read knowing only the files below it.
//!
//! File A imports file B when A names an item B defines: in a `use`, or in
//! a path through `crate::`, `super::`, `self::` or one of A's child
//! modules. A re-export (`pub use`) is a module's facade, not an import: a
//! path through it counts for the file that defines the item. Method calls
//! name no file and are not seen; splitting one type's `impl` over files
//! (`journal/`) is fine as long as the parent names nothing of its
//! children.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module by its path from the crate root (`[]` is `lib.rs`).
type ModPath = Vec<String>;

/// File -> the files it imports, each with the paths that import it.
type Graph = BTreeMap<ModPath, BTreeMap<ModPath, BTreeSet<String>>>;

/// Circles owed, by crate and files; the test fails when one is gone too,
/// so this list only shrinks. None are owed.
const OWED: &[(&str, &[&str])] = &[];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap()
}

/// Every `.rs` file under `src`, by module path.
fn module_files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: ModPath = relative.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            if matches!(module.last().map(String::as_str), Some("lib" | "main" | "mod")) {
                module.pop();
            }
            files.insert(module, path);
        }
    }
    files
}

/// The file a module path names, for messages.
fn file_name(files: &BTreeMap<ModPath, PathBuf>, module: &ModPath) -> String {
    let src = files[&Vec::new()].parent().unwrap().to_path_buf();
    files[module].strip_prefix(&src).unwrap().display().to_string()
}

/// `text` without comments, string literals and character literals (each
/// string becomes `""`), so that what is left is code.
fn strip(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        if c[i] == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else if i >= c.len() {
                    break;
                } else {
                    i += 1;
                }
            }
        } else if c[i] == 'r' && raw_string_at(&c, i) {
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            let closing: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            i += 2 + hashes;
            while i < c.len() && !c[i..].starts_with(&closing) {
                i += 1;
            }
            i += closing.len();
            out.push_str("\"\"");
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && (at(i + 1) == '\\' || at(i + 2) == '\'') {
            // A character literal (a lifetime has no closing quote).
            i += 2;
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Whether a raw string (`r"…"`, `r#"…"#`, `br"…"`) starts at the `r` at `i`.
fn raw_string_at(c: &[char], i: usize) -> bool {
    let starts_token = |j: usize| j == 0 || !is_ident(c[j - 1]);
    let prefix = starts_token(i) || (c[i - 1] == 'b' && starts_token(i - 1));
    let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
    prefix && c.get(i + 1 + hashes) == Some(&'"')
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `text` ends with the whole word `word`.
fn ends_with_word(text: &str, word: &str) -> bool {
    text.strip_suffix(word).is_some_and(|rest| !rest.ends_with(is_ident))
}

/// The identifier or path (`a::b::c`) starting at byte `i` of `code`, if
/// one starts there (and not inside a longer one).
fn path_at(code: &str, i: usize) -> Option<&str> {
    let before = code[..i].chars().next_back();
    if before.is_some_and(|b| is_ident(b) || b == ':') || !code[i..].starts_with(|c: char| is_ident(c)) {
        return None;
    }
    let mut end = i;
    loop {
        end += code[end..].find(|c: char| !is_ident(c)).unwrap_or(code.len() - end);
        let next = &code[end..];
        if next.starts_with("::") && next[2..].starts_with(|c: char| is_ident(c)) {
            end += 2;
        } else {
            return Some(&code[i..end]);
        }
    }
}

/// A `use` statement: where it starts and ends in the code, its tree
/// (`crate::a::{b, c as d}`), and whether it re-exports (`pub use`).
struct Use {
    span: std::ops::Range<usize>,
    tree: String,
    public: bool,
}

fn use_statements(code: &str) -> Vec<Use> {
    let mut uses = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("use") {
        let start = from + found;
        from = start + 3;
        let after = code[from..].chars().next();
        if path_at(code, start) != Some("use") || !after.is_some_and(char::is_whitespace) {
            continue;
        }
        let Some(len) = code[from..].find(';') else { break };
        let before = code[..start].trim_end();
        let public = ends_with_word(before, "pub")
            || (before.ends_with(')')
                && ends_with_word(before[..before.rfind('(').unwrap_or(0)].trim_end(), "pub"));
        uses.push(Use { span: start..from + len + 1, tree: code[from..from + len].to_string(), public });
        from += len + 1;
    }
    uses
}

/// The paths a use tree names, each with the name it brings in.
fn expand(tree: &str) -> Vec<(Vec<String>, String)> {
    let spaced = tree.replace("::", " :: ").replace('{', " { ").replace('}', " } ").replace(',', " , ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut out = Vec::new();
    expand_from(&tokens, &mut 0, &[], &mut out);
    out
}

fn expand_from(tokens: &[&str], i: &mut usize, prefix: &[String], out: &mut Vec<(Vec<String>, String)>) {
    let mut path = prefix.to_vec();
    while *i < tokens.len() {
        match tokens[*i] {
            "::" => *i += 1,
            "{" => {
                *i += 1;
                while *i < tokens.len() && tokens[*i] != "}" {
                    expand_from(tokens, i, &path, out);
                    if tokens.get(*i) == Some(&",") {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            "," | "}" => break,
            "as" => {
                let alias = tokens.get(*i + 1).unwrap_or(&"_").to_string();
                *i += 2;
                out.push((path.clone(), alias));
                return;
            }
            segment => {
                path.push(segment.to_string());
                *i += 1;
            }
        }
    }
    if path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    let name = path.last().cloned().unwrap_or_default();
    out.push((path, name));
}

/// The inline modules (`mod tests { … }`) of `code`: their spans and names,
/// outermost first.
fn inline_modules(code: &str) -> Vec<(std::ops::Range<usize>, String)> {
    let mut found = Vec::new();
    let mut open: Vec<(usize, Option<(usize, String)>)> = Vec::new();
    for (i, c) in code.char_indices() {
        match c {
            '{' => {
                let before = code[..i].trim_end();
                let name_at = before.rfind(|c: char| !is_ident(c)).map_or(0, |p| p + 1);
                let is_mod = ends_with_word(before[..name_at].trim_end(), "mod") && name_at < before.len();
                open.push((i, is_mod.then(|| (i, before[name_at..].to_string()))));
            }
            '}' => {
                if let Some((_, Some((start, name)))) = open.pop() {
                    found.push((start..i, name));
                }
            }
            _ => {}
        }
    }
    found.sort_by_key(|(span, _)| span.start);
    found
}

/// The module a path at byte `at` of the file of module `file` is written
/// in: the file's, or an inline module's inside it.
fn scope_at(file: &ModPath, inline: &[(std::ops::Range<usize>, String)], at: usize) -> ModPath {
    let mut scope = file.clone();
    scope.extend(inline.iter().filter(|(span, _)| span.contains(&at)).map(|(_, name)| name.clone()));
    scope
}

/// One crate's files and what their names resolve to.
struct Crate {
    /// Module -> its code (comments and literals stripped).
    code: BTreeMap<ModPath, String>,
    /// (module, name) -> the absolute path a `pub use` there re-exports.
    reexports: BTreeMap<(ModPath, String), ModPath>,
}

impl Crate {
    fn new(sources: &BTreeMap<ModPath, String>) -> Crate {
        let code: BTreeMap<ModPath, String> =
            sources.iter().map(|(m, text)| (m.clone(), strip(text))).collect();
        let mut krate = Crate { code, reexports: BTreeMap::new() };
        let mut reexports = BTreeMap::new();
        for (module, code) in &krate.code {
            for u in use_statements(code).into_iter().filter(|u| u.public) {
                for (path, name) in expand(&u.tree) {
                    if let Some(target) = krate.absolute(module, &path) {
                        reexports.insert((module.clone(), name), target);
                    }
                }
            }
        }
        krate.reexports = reexports;
        krate
    }

    /// `path`, written in module `scope`, from the crate root; `None` when
    /// it leaves the crate (another crate, `std`).
    fn absolute(&self, scope: &ModPath, path: &[String]) -> Option<ModPath> {
        let (first, rest) = path.split_first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "super" => scope[..scope.len().checked_sub(1)?].to_vec(),
            "self" => scope.clone(),
            child if self.code.contains_key(&[scope.as_slice(), &[child.to_string()]].concat()) => {
                return Some([scope.as_slice(), path].concat());
            }
            _ => return None,
        };
        let supers = rest.iter().take_while(|s| *s == "super").count();
        base.truncate(base.len().checked_sub(supers)?);
        Some([base.as_slice(), &rest[supers..]].concat())
    }

    /// The file that defines what an absolute path names: its longest
    /// prefix that is a file's module, through re-exports.
    fn file_of(&self, path: &[String], hops: usize) -> ModPath {
        let mut module = Vec::new();
        for (i, segment) in path.iter().enumerate() {
            let deeper = [module.as_slice(), std::slice::from_ref(segment)].concat();
            if self.code.contains_key(&deeper) {
                module = deeper;
                continue;
            }
            if let Some(target) = self.reexports.get(&(module.clone(), segment.clone())) {
                if hops < 8 {
                    return self.file_of(&[target.as_slice(), &path[i + 1..]].concat(), hops + 1);
                }
            }
            break;
        }
        module
    }

    /// The paths that file `module` names in its imports and code, each
    /// with the module it is written in. Re-exports are left out.
    fn named_paths(&self, module: &ModPath) -> Vec<(ModPath, Vec<String>)> {
        let code = &self.code[module];
        let inline = inline_modules(code);
        let uses = use_statements(code);
        let mut paths = Vec::new();
        for u in uses.iter().filter(|u| !u.public) {
            let scope = scope_at(module, &inline, u.span.start);
            paths.extend(expand(&u.tree).into_iter().map(|(path, _)| (scope.clone(), path)));
        }
        for (i, _) in code.char_indices() {
            if uses.iter().any(|u| u.span.contains(&i)) {
                continue;
            }
            let Some(path) = path_at(code, i).filter(|p| p.contains("::")) else { continue };
            paths.push((scope_at(module, &inline, i), path.split("::").map(str::to_string).collect()));
        }
        paths
    }

    /// File -> the files it imports, and through which paths.
    fn graph(&self) -> Graph {
        let mut graph = Graph::new();
        for module in self.code.keys() {
            let edges = graph.entry(module.clone()).or_default();
            for (scope, path) in self.named_paths(module) {
                let Some(target) = self.absolute(&scope, &path) else { continue };
                let file = self.file_of(&target, 0);
                if &file != module {
                    edges.entry(file).or_default().insert(path.join("::"));
                }
            }
        }
        graph
    }
}

/// The circles of `graph`: its strongly connected components of more than
/// one file (Tarjan's algorithm), each sorted.
fn circles(graph: &Graph) -> Vec<Vec<ModPath>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g ModPath, usize>,
        low: BTreeMap<&'g ModPath, usize>,
        stack: Vec<&'g ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    fn visit<'g>(w: &mut Walk<'g>, v: &'g ModPath) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        for u in w.graph[v].keys() {
            if !w.index.contains_key(u) {
                visit(w, u);
                w.low.insert(v, w.low[v].min(w.low[u]));
            } else if w.stack.contains(&u) {
                w.low.insert(v, w.low[v].min(w.index[u]));
            }
        }
        if w.low[v] == w.index[v] {
            let at = w.stack.iter().rposition(|x| *x == v).unwrap();
            let mut component: Vec<ModPath> = w.stack.drain(at..).cloned().collect();
            component.sort();
            if component.len() > 1 {
                w.found.push(component);
            }
        }
    }
    let mut walk =
        Walk { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            visit(&mut walk, v);
        }
    }
    walk.found
}

/// A circle's imports, one a line: `a.rs -> b.rs (crate::b::X)`.
fn describe(graph: &Graph, circle: &[ModPath], name: &dyn Fn(&ModPath) -> String) -> String {
    let mut lines = Vec::new();
    for from in circle {
        for (to, paths) in graph[from].iter().filter(|(to, _)| circle.contains(to)) {
            let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
            lines.push(format!("  {} -> {} ({})", name(from), name(to), paths.join(", ")));
        }
    }
    lines.join("\n")
}

#[test]
fn no_crate_has_a_circle_between_files() {
    let mut found = Vec::new();
    let mut owed_seen = BTreeSet::new();
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.join("lib.rs").exists() && !src.join("main.rs").exists() {
            continue;
        }
        let krate = src.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
        let files = module_files(&src);
        let sources = files.iter().map(|(m, p)| (m.clone(), std::fs::read_to_string(p).unwrap())).collect();
        let graph = Crate::new(&sources).graph();
        let name = |m: &ModPath| file_name(&files, m);
        for circle in circles(&graph) {
            let names: Vec<String> = circle.iter().map(name).collect();
            let owed = OWED.iter().find(|(c, f)| *c == krate && f.iter().eq(names.iter()));
            if let Some(owed) = owed {
                owed_seen.insert(*owed);
                continue;
            }
            found.push(format!("{krate}: {}\n{}", names.join(", "), describe(&graph, &circle, &name)));
        }
    }
    assert!(
        found.is_empty(),
        "files that import each other (move what they share into a file of its own):\n{}",
        found.join("\n")
    );
    let paid: Vec<_> = OWED.iter().filter(|o| !owed_seen.contains(*o)).collect();
    assert!(paid.is_empty(), "circles no longer there; remove them from OWED: {paid:?}");
}

/// Module path from `a::b` (empty for the root).
fn module(path: &str) -> ModPath {
    path.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect()
}

fn circles_of(files: &[(&str, &str)]) -> Vec<Vec<ModPath>> {
    let sources = files.iter().map(|(m, text)| (module(m), text.to_string())).collect();
    circles(&Crate::new(&sources).graph())
}

#[test]
fn two_files_importing_each_other_are_a_circle() {
    let files =
        [("", "mod a; mod b;"), ("a", "use crate::b::B; pub struct A;"), ("b", "pub struct B(super::a::A);")];
    assert_eq!(circles_of(&files), vec![vec![module("a"), module("b")]]);
}

#[test]
fn a_circle_through_a_re_export_is_found_at_the_defining_file() {
    let files = [
        ("", "mod a; mod b; pub use a::A;"),
        ("a", "pub struct A(crate::b::B);"),
        ("b", "use crate::A; pub struct B;"),
    ];
    assert_eq!(circles_of(&files), vec![vec![module("a"), module("b")]]);
}

#[test]
fn a_parent_calling_its_child_by_path_and_the_child_using_the_parent_are_a_circle() {
    let files =
        [("", "mod a; pub struct W; fn f() { a::run(W) }"), ("a", "use super::W; pub fn run(_: W) {}")];
    assert_eq!(circles_of(&files), vec![vec![module(""), module("a")]]);
}

#[test]
fn re_exports_tests_comments_and_strings_make_no_circle() {
    let files = [
        ("", "mod a; mod b; pub use a::A; pub use b::B;"),
        ("a", "use crate::B; pub struct A; // crate::a::A\n#[cfg(test)]\nmod tests { use super::*; }"),
        ("b", "pub struct B; const S: &str = \"crate::a::A\"; const C: char = '\"';"),
    ];
    assert_eq!(circles_of(&files), Vec::<Vec<ModPath>>::new());
}
