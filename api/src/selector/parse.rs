//! Recursive descent over the tokens: `||` binds loosest, then `&&`, then
//! `!`. The recursion is bounded: `!` and `(` may nest [`MAX_NESTING`]
//! levels, and a chain of `&&` or `||` becomes a balanced tree, so that
//! neither the parser nor the code that walks a selector recursively
//! (matching, printing, comparing, dropping) can exhaust a thread's stack,
//! however long the text.

use std::collections::BTreeSet;

use super::lexer::{Tok, lex};
use super::{MAX_NESTING, Selector, SelectorError};

struct Parser<'a> {
    text: &'a str,
    toks: Vec<(Tok, usize)>,
    pos: usize,
    /// How many `!` and `(` enclose the token at `pos`.
    depth: usize,
}

type Join = fn(Box<Selector>, Box<Selector>) -> Selector;

/// The terms of a chain joined by `join` into a tree of depth ⌈log2 n⌉
/// rather than n. Up to three terms keep the left-leaning shape
/// `((a && b) && c)`; `&&` and `||` are associative, so the shape changes
/// nothing of what is selected. No terms: `all()`.
pub(super) fn balanced(mut terms: Vec<Selector>, join: Join) -> Selector {
    match terms.len() {
        0 | 1 => terms.pop().unwrap_or(Selector::All),
        n => {
            let right = terms.split_off(n.div_ceil(2));
            join(
                Box::new(balanced(terms, join)),
                Box::new(balanced(right, join)),
            )
        }
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("{w:?}"),
        Tok::Str(s) => format!("the string {s:?}"),
        Tok::EqEq => "'=='".into(),
        Tok::NotEq => "'!='".into(),
        Tok::Bang => "'!'".into(),
        Tok::AndAnd => "'&&'".into(),
        Tok::OrOr => "'||'".into(),
        Tok::LParen => "'('".into(),
        Tok::RParen => "')'".into(),
        Tok::LBrace => "'{'".into(),
        Tok::RBrace => "'}'".into(),
        Tok::Comma => "','".into(),
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    fn column(&self) -> usize {
        self.toks
            .get(self.pos)
            .map_or(self.text.chars().count() + 1, |(_, c)| *c)
    }

    fn error<T>(&self, expected: &str) -> Result<T, SelectorError> {
        let found = match self.peek() {
            Some(t) => describe(t),
            None => "the end".into(),
        };
        Err(SelectorError {
            text: self.text.to_string(),
            column: self.column(),
            message: format!("expected {expected}, found {found}"),
        })
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == Some(t) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, t: Tok, what: &str) -> Result<(), SelectorError> {
        if self.eat(&t) {
            Ok(())
        } else {
            self.error(what)
        }
    }

    fn word(&mut self, w: &str) -> bool {
        self.eat(&Tok::Word(w.to_string()))
    }

    fn string(&mut self) -> Result<String, SelectorError> {
        match self.peek() {
            Some(Tok::Str(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => self.error("a quoted string"),
        }
    }

    /// Steps over the `!` or `(` at `pos` into one more level of nesting;
    /// past [`MAX_NESTING`] the selector is refused, before the recursion
    /// grows any further.
    fn enter(&mut self) -> Result<(), SelectorError> {
        if self.depth >= MAX_NESTING {
            return Err(SelectorError {
                text: self.text.to_string(),
                column: self.column(),
                message: format!("selector nests deeper than {MAX_NESTING} levels of '!' and '('"),
            });
        }
        self.depth += 1;
        self.pos += 1;
        Ok(())
    }

    fn or(&mut self) -> Result<Selector, SelectorError> {
        let mut terms = vec![self.and()?];
        while self.eat(&Tok::OrOr) {
            terms.push(self.and()?);
        }
        Ok(balanced(terms, Selector::Or))
    }

    fn and(&mut self) -> Result<Selector, SelectorError> {
        let mut terms = vec![self.unary()?];
        while self.eat(&Tok::AndAnd) {
            terms.push(self.unary()?);
        }
        Ok(balanced(terms, Selector::And))
    }

    fn unary(&mut self) -> Result<Selector, SelectorError> {
        if self.peek() == Some(&Tok::Bang) {
            self.enter()?;
            let e = self.unary()?;
            self.depth -= 1;
            return Ok(Selector::Not(Box::new(e)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Selector, SelectorError> {
        if self.peek() == Some(&Tok::LParen) {
            self.enter()?;
            let e = self.or()?;
            self.expect(Tok::RParen, "')'")?;
            self.depth -= 1;
            return Ok(e);
        }
        let key = match self.peek() {
            Some(Tok::Word(w)) => w.clone(),
            _ => return self.error("a label key, all(), global(), has(…), '!' or '('"),
        };
        self.pos += 1;
        let call = self.peek() == Some(&Tok::LParen);
        if key == "all" && call {
            self.pos += 1;
            self.expect(Tok::RParen, "')' (all() takes nothing)")?;
            return Ok(Selector::All);
        }
        if key == "global" && call {
            self.pos += 1;
            self.expect(Tok::RParen, "')' (global() takes nothing)")?;
            return Ok(Selector::Global);
        }
        if key == "has" && call {
            self.pos += 1;
            let k = match self.peek() {
                Some(Tok::Word(w)) => w.clone(),
                _ => return self.error("a label key"),
            };
            self.pos += 1;
            self.expect(Tok::RParen, "')'")?;
            return Ok(Selector::Has(k));
        }
        if self.eat(&Tok::EqEq) {
            return Ok(Selector::Eq(key, self.string()?));
        }
        if self.eat(&Tok::NotEq) {
            return Ok(Selector::Ne(key, self.string()?));
        }
        if self.word("in") {
            return Ok(Selector::In(key, self.set()?));
        }
        if self.word("not") {
            if !self.word("in") {
                return self.error("'in' after 'not'");
            }
            return Ok(Selector::NotIn(key, self.set()?));
        }
        if self.word("contains") {
            return Ok(Selector::Contains(key, self.string()?));
        }
        if self.word("starts") {
            if !self.word("with") {
                return self.error("'with' after 'starts'");
            }
            return Ok(Selector::StartsWith(key, self.string()?));
        }
        if self.word("ends") {
            if !self.word("with") {
                return self.error("'with' after 'ends'");
            }
            return Ok(Selector::EndsWith(key, self.string()?));
        }
        self.error(&format!(
            "an operator after {key:?} (==, !=, in, not in, contains, starts with, ends with)"
        ))
    }

    fn set(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        self.expect(Tok::LBrace, "'{'")?;
        let mut out = BTreeSet::new();
        if self.eat(&Tok::RBrace) {
            return Ok(out);
        }
        loop {
            out.insert(self.string()?);
            if self.eat(&Tok::RBrace) {
                return Ok(out);
            }
            self.expect(Tok::Comma, "',' or '}'")?;
        }
    }
}

pub fn parse(text: &str) -> Result<Selector, SelectorError> {
    let toks = lex(text)?;
    if toks.is_empty() {
        return Ok(Selector::All);
    }
    let mut p = Parser {
        text,
        toks,
        pos: 0,
        depth: 0,
    };
    let e = p.or()?;
    if p.pos < p.toks.len() {
        return p.error("'&&', '||' or the end");
    }
    Ok(e)
}
