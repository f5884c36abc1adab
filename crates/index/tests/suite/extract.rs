//! Per-language symbol extraction fixtures.

use trellis_index::ChunkKind;
use trellis_index::lang::Lang;
use trellis_index::symbols::{FileSymbols, Symbol, extract};

fn parse(path: &str, src: &str) -> FileSymbols {
    extract(Lang::detect(path), src).expect("parses")
}

fn find<'a>(fs: &'a FileSymbols, qualified: &str) -> &'a Symbol {
    fs.symbols
        .iter()
        .find(|s| s.decl.qualified_name == qualified)
        .unwrap_or_else(|| {
            let all: Vec<_> = fs.symbols.iter().map(|s| &s.decl.qualified_name).collect();
            panic!("no symbol {qualified}; have {all:?}")
        })
}

#[test]
fn rust() {
    let src = r#"use std::collections::HashMap;
use crate::x::{A, B};

/// A store of things.
/// Second line.
#[derive(Debug)]
pub struct Store {
    items: HashMap<String, u32>,
}

pub enum Mode { Fast, Slow }

pub trait Backend {
    /// Reads a key.
    fn read(&self, key: &str) -> Option<u32>;
}

impl Store {
    /// Makes one.
    pub fn new() -> Self {
        Store { items: HashMap::new() }
    }

    fn get(&self, key: &str) -> Option<u32> {
        self.items.get(key).copied()
    }
}

impl Backend for Store {
    fn read(&self, key: &str) -> Option<u32> { self.get(key) }
}

pub fn helper(a: u32, b: u32) -> u32 { a + b }

const LIMIT: usize = 3;
type Map = HashMap<String, u32>;
mod inner { pub fn deep() {} }
"#;
    let fs = parse("src/store.rs", src);
    let store = find(&fs, "Store");
    assert_eq!(store.decl.kind, ChunkKind::Class);
    assert_eq!(store.decl.doc, "A store of things.\nSecond line.");
    assert_eq!(store.decl.start_line, 4, "doc comment starts the symbol");
    assert_eq!(find(&fs, "Mode").decl.kind, ChunkKind::Enum);
    assert_eq!(find(&fs, "Backend").decl.kind, ChunkKind::Interface);
    let read = find(&fs, "Backend::read");
    assert_eq!(read.decl.kind, ChunkKind::Method);
    assert_eq!(read.decl.doc, "Reads a key.");
    let new = find(&fs, "Store::new");
    assert_eq!(new.decl.kind, ChunkKind::Method);
    assert_eq!(new.decl.parent, "Store");
    assert_eq!(new.decl.returns, "Self");
    assert_eq!(new.decl.doc, "Makes one.");
    let get = find(&fs, "Store::get");
    assert_eq!(get.decl.params, "(&self, key: &str)");
    assert_eq!(get.decl.returns, "Option<u32>");
    assert_eq!(
        get.decl.signature,
        "fn get(&self, key: &str) -> Option<u32>"
    );
    let helper = find(&fs, "helper");
    assert_eq!(helper.decl.kind, ChunkKind::Function);
    assert_eq!((helper.decl.start_line, helper.decl.end_line), (33, 33));
    assert_eq!(find(&fs, "LIMIT").decl.kind, ChunkKind::Constant);
    assert_eq!(find(&fs, "Map").decl.kind, ChunkKind::Type);
    assert_eq!(find(&fs, "inner::deep").decl.kind, ChunkKind::Function);
    assert_eq!(fs.imports.len(), 2);
    assert_eq!(fs.imports[0].text, "use std::collections::HashMap;");
    // `get` is referenced from `read` (beyond its definition).
    assert!(fs.refs.get("get").copied().unwrap_or(0) >= 1);
    assert!(fs.refs.contains_key("HashMap"));
}

#[test]
fn python() {
    let src = r#"import os
from typing import Optional

class Cache(Base):
    """Caches values.

    Long description."""

    def __init__(self, size: int) -> None:
        self.size = size

    @property
    def full(self) -> bool:
        return False

def load(path: str, *, strict: bool = True) -> Optional[dict]:
    """Loads a file."""
    return None
"#;
    let fs = parse("pkg/cache.py", src);
    let c = find(&fs, "Cache");
    assert_eq!(c.decl.kind, ChunkKind::Class);
    assert_eq!(c.decl.doc, "Caches values.\n\nLong description.");
    let init = find(&fs, "Cache.__init__");
    assert_eq!(init.decl.kind, ChunkKind::Method);
    assert_eq!(init.decl.params, "(self, size: int)");
    assert_eq!(init.decl.returns, "None");
    assert_eq!(find(&fs, "Cache.full").decl.kind, ChunkKind::Method);
    let load = find(&fs, "load");
    assert_eq!(load.decl.kind, ChunkKind::Function);
    assert_eq!(load.decl.doc, "Loads a file.");
    assert_eq!(load.decl.returns, "Optional[dict]");
    assert_eq!(fs.imports.len(), 2);
}

/// Each definition's qualified name, kind and lines.
fn defs(fs: &FileSymbols) -> Vec<(&str, ChunkKind, u32, u32)> {
    fs.symbols
        .iter()
        .map(|s| {
            (
                s.decl.qualified_name.as_str(),
                s.decl.kind,
                s.decl.start_line,
                s.decl.end_line,
            )
        })
        .collect()
}

#[test]
fn module_level_names_are_constants_and_local_ones_are_not() {
    let py = r#"NOT_STRONG_RE = r'((^|\s)(\*|_)(?=\s|$))'
KEYWORDS: dict = {
    'ORDER BY': 1,
}
a, b = 1, 2
obj.attr = 3

def f():
    local = 1
    return local

class C:
    field = 2
"#;
    let fs = parse("pkg/patterns.py", py);
    assert_eq!(
        defs(&fs),
        [
            ("NOT_STRONG_RE", ChunkKind::Constant, 1, 1),
            ("KEYWORDS", ChunkKind::Constant, 2, 4),
            ("f", ChunkKind::Function, 8, 10),
            ("C", ChunkKind::Class, 12, 13),
        ]
    );
    let js = r#"var PATTERN = /[\x00-\x08]/;
const TABLE = {
  a: 1,
};
let { x } = require('y');
const square = (v) => v * v;
function g() { const inner = 1; return inner; }
export const LIMIT = 10;
"#;
    let fs = parse("lib/loader.js", js);
    assert_eq!(
        defs(&fs),
        [
            ("PATTERN", ChunkKind::Constant, 1, 1),
            ("TABLE", ChunkKind::Constant, 2, 4),
            ("square", ChunkKind::Function, 6, 6),
            ("g", ChunkKind::Function, 7, 7),
            ("LIMIT", ChunkKind::Constant, 8, 8),
        ]
    );
}

#[test]
fn javascript() {
    let src = r#"import { x } from './x.js';

/** Adds numbers. */
export function add(a, b) { return a + b; }

export class Counter extends Base {
  constructor(start) { super(); this.n = start; }
  increment(by = 1) { this.n += by; }
}

const square = (v) => v * v;
"#;
    let fs = parse("web/app.js", src);
    let add = find(&fs, "add");
    assert_eq!(add.decl.kind, ChunkKind::Function);
    assert_eq!(add.decl.doc, "Adds numbers.");
    assert_eq!(add.decl.params, "(a, b)");
    assert_eq!(find(&fs, "Counter").decl.kind, ChunkKind::Class);
    assert_eq!(find(&fs, "Counter.increment").decl.kind, ChunkKind::Method);
    assert_eq!(
        find(&fs, "Counter.constructor").decl.kind,
        ChunkKind::Method
    );
    assert_eq!(find(&fs, "square").decl.kind, ChunkKind::Function);
    assert_eq!(fs.imports.len(), 1);
}

#[test]
fn typescript_and_tsx() {
    let src = r#"import type { A } from "./a";

export interface Shape {
  area(): number;
}

export type Id = string;

export enum Color { Red, Green }

export abstract class Base implements Shape {
  abstract area(): number;
  describe(prefix: string): string { return prefix + this.area(); }
}

export function make(id: Id): Shape | null { return null; }

namespace Geo { export function origin(): number { return 0; } }
"#;
    let fs = parse("src/shape.ts", src);
    assert_eq!(find(&fs, "Shape").decl.kind, ChunkKind::Interface);
    assert_eq!(find(&fs, "Shape.area").decl.kind, ChunkKind::Method);
    assert_eq!(find(&fs, "Id").decl.kind, ChunkKind::Type);
    assert_eq!(find(&fs, "Color").decl.kind, ChunkKind::Enum);
    assert_eq!(find(&fs, "Base").decl.kind, ChunkKind::Class);
    let d = find(&fs, "Base.describe");
    assert_eq!(d.decl.params, "(prefix: string)");
    assert_eq!(d.decl.returns, ": string");
    assert_eq!(find(&fs, "make").decl.returns, ": Shape | null");
    assert_eq!(find(&fs, "Geo.origin").decl.kind, ChunkKind::Function);
    assert_eq!(fs.imports.len(), 1);

    let tsx = r#"export function Button(props: { label: string }) {
  return <button>{props.label}</button>;
}
"#;
    let fs = parse("ui/Button.tsx", tsx);
    assert_eq!(find(&fs, "Button").decl.kind, ChunkKind::Function);
}

#[test]
fn go() {
    let src = r#"package server

import (
	"fmt"
	"net/http"
)

// Server serves.
type Server struct {
	addr string
}

type Handler interface {
	Serve(w http.ResponseWriter) error
}

// Start starts it.
func (s *Server) Start(port int) error {
	fmt.Println(s.addr)
	return nil
}

func New(addr string) *Server { return &Server{addr: addr} }
"#;
    let fs = parse("server/server.go", src);
    let s = find(&fs, "Server");
    assert_eq!(s.decl.kind, ChunkKind::Class);
    assert_eq!(s.decl.doc, "Server serves.");
    assert_eq!(find(&fs, "Handler").decl.kind, ChunkKind::Interface);
    let start = find(&fs, "Server.Start");
    assert_eq!(start.decl.kind, ChunkKind::Method);
    assert_eq!(start.decl.parent, "Server");
    assert_eq!(start.decl.returns, "error");
    assert_eq!(start.decl.doc, "Start starts it.");
    assert_eq!(find(&fs, "New").decl.returns, "*Server");
    assert_eq!(fs.imports.len(), 1);
}

#[test]
fn java() {
    let src = r#"package com.example;

import java.util.List;

/**
 * A repository.
 */
public class Repo<T> {
    private final List<T> items;

    public Repo(List<T> items) { this.items = items; }

    /** Finds one. */
    public T find(int id) { return items.get(id); }

    interface Listener { void changed(T item); }
}

enum Level { LOW, HIGH }
"#;
    let fs = parse("src/main/java/com/example/Repo.java", src);
    let r = find(&fs, "Repo");
    assert_eq!(r.decl.kind, ChunkKind::Class);
    assert_eq!(r.decl.doc, "A repository.");
    assert_eq!(find(&fs, "Repo.Repo").decl.kind, ChunkKind::Method);
    let f = find(&fs, "Repo.find");
    assert_eq!(f.decl.params, "(int id)");
    assert_eq!(f.decl.returns, "T");
    assert_eq!(f.decl.doc, "Finds one.");
    assert_eq!(find(&fs, "Repo.Listener").decl.kind, ChunkKind::Interface);
    assert_eq!(
        find(&fs, "Repo.Listener.changed").decl.kind,
        ChunkKind::Method
    );
    assert_eq!(find(&fs, "Level").decl.kind, ChunkKind::Enum);
    assert_eq!(fs.imports.len(), 1);
}

#[test]
fn c() {
    let src = r#"#include <stdio.h>
#include "list.h"

#define MAX_ITEMS 16

/* A list node. */
struct node {
    int value;
    struct node *next;
};

typedef struct node node_t;

enum color { RED, GREEN };

int list_len(const struct node *head);

/* Counts nodes. */
static int count(const struct node *head) {
    int n = 0;
    while (head) { n++; head = head->next; }
    return n;
}

char *name_of(int id) { return 0; }
"#;
    let fs = parse("src/list.c", src);
    let n = find(&fs, "node");
    assert_eq!(n.decl.kind, ChunkKind::Class);
    assert_eq!(n.decl.doc, "A list node.");
    assert_eq!(find(&fs, "node_t").decl.kind, ChunkKind::Type);
    assert_eq!(find(&fs, "color").decl.kind, ChunkKind::Enum);
    assert_eq!(find(&fs, "MAX_ITEMS").decl.kind, ChunkKind::Constant);
    assert_eq!(find(&fs, "list_len").decl.kind, ChunkKind::Function);
    let count = find(&fs, "count");
    assert_eq!(count.decl.kind, ChunkKind::Function);
    assert_eq!(count.decl.params, "(const struct node *head)");
    assert_eq!(count.decl.returns, "int");
    assert_eq!(count.decl.doc, "Counts nodes.");
    assert_eq!(find(&fs, "name_of").decl.kind, ChunkKind::Function);
    assert_eq!(fs.imports.len(), 2);
}

#[test]
fn cpp() {
    let src = r#"#include <vector>

namespace geo {

/// A point.
class Point {
public:
    Point(double x, double y);
    double norm() const;
private:
    double x_, y_;
};

double Point::norm() const { return x_ * x_ + y_ * y_; }

template <typename T>
T twice(T v) { return v + v; }

}
"#;
    let fs = parse("src/point.cpp", src);
    assert_eq!(find(&fs, "geo").decl.kind, ChunkKind::Module);
    let p = find(&fs, "geo::Point");
    assert_eq!(p.decl.kind, ChunkKind::Class);
    assert_eq!(p.decl.doc, "A point.");
    assert_eq!(find(&fs, "geo::Point::norm").decl.kind, ChunkKind::Method);
    // The out-of-class definition names its class explicitly.
    let defs: Vec<_> = fs
        .symbols
        .iter()
        .filter(|s| s.decl.name == "norm")
        .map(|s| (s.decl.qualified_name.as_str(), s.decl.start_line))
        .collect();
    assert!(defs.contains(&("geo::Point::norm", 14)), "{defs:?}");
    let t = find(&fs, "geo::twice");
    assert_eq!(t.decl.kind, ChunkKind::Function);
    assert_eq!(t.decl.returns, "T");
    assert_eq!(fs.imports.len(), 1);
}

#[test]
fn doc_comments_need_adjacency_and_skip_attributes() {
    let src = r#"//! Module docs belong to the module.
fn first() {}

// Detached comment.

fn detached() {}

/// Kept across attributes.
#[inline]
#[allow(dead_code)]
fn attributed() {}

/// One.
/// Two.
fn two_lines() {}
"#;
    let fs = parse("src/docs.rs", src);
    assert_eq!(find(&fs, "first").decl.doc, "");
    assert_eq!(
        find(&fs, "detached").decl.doc,
        "",
        "a blank line separates them"
    );
    let a = find(&fs, "attributed");
    assert_eq!(a.decl.doc, "Kept across attributes.");
    assert_eq!(a.decl.start_line, 8, "starts at its doc comment");
    assert_eq!(find(&fs, "two_lines").decl.doc, "One.\nTwo.");
}

#[test]
fn docs_of_thousands_of_sibling_definitions() {
    // Generated bindings put thousands of items side by side; each keeps its own comment.
    let mut src = String::new();
    for i in 0..3000 {
        src.push_str(&format!("/// Item {i}.\npub const C{i}: u32 = {i};\n"));
    }
    let fs = parse("src/gen.rs", &src);
    assert_eq!(fs.symbols.len(), 3000);
    assert_eq!(find(&fs, "C0").decl.doc, "Item 0.");
    assert_eq!(find(&fs, "C2999").decl.doc, "Item 2999.");
    assert_eq!(find(&fs, "C1500").decl.start_line, 3001);
}
