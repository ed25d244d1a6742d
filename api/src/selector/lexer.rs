//! Tokens of the selector language, each with its 1-based column.

use super::SelectorError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// A label key or a keyword (`all`, `has`, `in`, `not`, `contains`,
    /// `starts`, `ends`, `with`).
    Word(String),
    Str(String),
    EqEq,
    NotEq,
    Bang,
    AndAnd,
    OrOr,
    LParen,
    RParen,
    LBrace,
    RBrace,
    Comma,
}

/// Characters of a label key: letters, digits and `_ . / -`.
fn key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

pub fn lex(text: &str) -> Result<Vec<(Tok, usize)>, SelectorError> {
    let err = |column: usize, message: String| SelectorError {
        text: text.to_string(),
        column,
        message,
    };
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        let next = chars.get(i + 1).copied();
        let two = |t: Tok| (t, 2);
        let (tok, len) = match c {
            c if c.is_whitespace() => {
                i += 1;
                continue;
            }
            '=' if next == Some('=') => two(Tok::EqEq),
            '!' if next == Some('=') => two(Tok::NotEq),
            '&' if next == Some('&') => two(Tok::AndAnd),
            '|' if next == Some('|') => two(Tok::OrOr),
            '!' => (Tok::Bang, 1),
            '(' => (Tok::LParen, 1),
            ')' => (Tok::RParen, 1),
            '{' => (Tok::LBrace, 1),
            '}' => (Tok::RBrace, 1),
            ',' => (Tok::Comma, 1),
            '\'' | '"' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&x| x == c)
                    .ok_or_else(|| err(col, "string not closed".into()))?;
                let s: String = chars[i + 1..i + 1 + end].iter().collect();
                (Tok::Str(s), end + 2)
            }
            c if key_char(c) => {
                let len = chars[i..].iter().take_while(|&&x| key_char(x)).count();
                (Tok::Word(chars[i..i + len].iter().collect()), len)
            }
            '=' => return Err(err(col, "'=' is not an operator; use '=='".into())),
            '&' => return Err(err(col, "'&' is not an operator; use '&&'".into())),
            '|' => return Err(err(col, "'|' is not an operator; use '||'".into())),
            other => return Err(err(col, format!("unexpected character {other:?}"))),
        };
        out.push((tok, col));
        i += len;
    }
    Ok(out)
}
