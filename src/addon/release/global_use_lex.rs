//! The tokens of Go template actions (`{{ … }}`), as much of text/template's lexer as
//! [`crate::addon::release::global_use`] needs: the text between actions is skipped, comments are
//! dropped, literals become one token whose value does not matter. Anything else
//! this lexer does not know is an error, which the reader takes as "may read
//! `global`". It never panics on any input (fuzzed through the reader).

/// Most parentheses open at once in one action.
const MAX_DEPTH: usize = 64;

/// One token of an action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tok<'a> {
    /// A function name or keyword (`if`, `include`, `true`).
    Ident(&'a str),
    /// `.Name` starting an operand (a field of the dot).
    Field(&'a str),
    /// `.Name` glued to what precedes it (`$x.Name`, `.A.Name`, `(…).Name`).
    GluedField(&'a str),
    /// `.` alone.
    Dot,
    /// `$name`, or `$` (the name is then empty).
    Var(&'a str),
    /// A string, raw string, character or number.
    Literal,
    LParen,
    RParen,
    Pipe,
    Comma,
    /// `:=`
    Declare,
    /// `=`
    Assign,
}

impl<'a> Tok<'a> {
    /// The token as the first of an operand's chain (a glued field becomes a field).
    pub(crate) fn unglue(&self) -> Tok<'a> {
        match self {
            Tok::GluedField(name) => Tok::Field(name),
            other => other.clone(),
        }
    }

    fn takes_field(&self) -> bool {
        matches!(
            self,
            Tok::Var(_) | Tok::RParen | Tok::Field(_) | Tok::GluedField(_)
        )
    }
}

/// The tokens of every action of `text` but comments, in order.
pub(crate) fn lex_actions(text: &str) -> Result<Vec<Vec<Tok<'_>>>, LexError> {
    let mut lexer = Lexer { text, at: 0 };
    let mut actions = Vec::new();
    while let Some(open) = text.get(lexer.at..).and_then(|rest| rest.find("{{")) {
        lexer.at += open + 2;
        if lexer.peek(0) == Some(b'-') && lexer.peek(1).is_some_and(is_space) {
            lexer.at += 2;
        }
        lexer.skip_spaces();
        if lexer.rest().starts_with("/*") {
            lexer.comment()?;
            continue;
        }
        actions.push(lexer.action()?);
    }
    Ok(actions)
}

struct Lexer<'a> {
    text: &'a str,
    at: usize,
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

impl<'a> Lexer<'a> {
    fn peek(&self, ahead: usize) -> Option<u8> {
        self.text.as_bytes().get(self.at + ahead).copied()
    }

    fn rest(&self) -> &'a str {
        self.text.get(self.at..).unwrap_or_default()
    }

    fn skip_spaces(&mut self) -> usize {
        let start = self.at;
        while self.peek(0).is_some_and(is_space) {
            self.at += 1;
        }
        self.at - start
    }

    /// `/* … */`, then the action's end.
    fn comment(&mut self) -> Result<(), LexError> {
        let end = self.rest().find("*/").ok_or(LexError::UnclosedComment)?;
        self.at += end + 2;
        self.skip_spaces();
        if self.rest().starts_with("-}}") {
            self.at += 1;
        }
        if !self.rest().starts_with("}}") {
            return Err(LexError::CommentWithMore);
        }
        self.at += 2;
        Ok(())
    }

    /// The tokens up to the action's `}}` (or ` -}}`).
    fn action(&mut self) -> Result<Vec<Tok<'a>>, LexError> {
        let mut toks: Vec<Tok<'a>> = Vec::new();
        let mut depth = 0usize;
        loop {
            let spaced = self.skip_spaces() > 0 || toks.is_empty();
            let rest = self.rest();
            if rest.starts_with("}}") {
                self.at += 2;
                return Ok(toks);
            }
            if spaced && rest.starts_with("-}}") {
                self.at += 3;
                return Ok(toks);
            }
            let glued = !spaced && toks.last().is_some_and(Tok::takes_field);
            let tok = self.token(glued)?;
            match tok {
                Tok::LParen => depth += 1,
                Tok::RParen => depth = depth.saturating_sub(1),
                _ => {}
            }
            // The reader recurses once per level.
            if depth > MAX_DEPTH {
                return Err(LexError::TooDeep);
            }
            toks.push(tok);
        }
    }

    fn token(&mut self, glued: bool) -> Result<Tok<'a>, LexError> {
        let Some(b) = self.peek(0) else {
            return Err(LexError::UnclosedAction);
        };
        let single = match b {
            b'(' => Some(Tok::LParen),
            b')' => Some(Tok::RParen),
            b'|' => Some(Tok::Pipe),
            b',' => Some(Tok::Comma),
            b'=' => Some(Tok::Assign),
            _ => None,
        };
        if let Some(tok) = single {
            self.at += 1;
            return Ok(tok);
        }
        match b {
            b':' if self.peek(1) == Some(b'=') => {
                self.at += 2;
                Ok(Tok::Declare)
            }
            b'"' | b'\'' => self.quoted(b),
            b'`' => {
                let end = self.rest()[1..]
                    .find('`')
                    .ok_or(LexError::UnclosedRawString)?;
                self.at += end + 2;
                Ok(Tok::Literal)
            }
            b'$' => {
                self.at += 1;
                Ok(Tok::Var(self.word()))
            }
            b'.' if self
                .peek(1)
                .is_some_and(|c| is_ident(c) && !c.is_ascii_digit()) =>
            {
                self.at += 1;
                let name = self.word();
                Ok(if glued {
                    Tok::GluedField(name)
                } else {
                    Tok::Field(name)
                })
            }
            b'.' if self.peek(1).is_some_and(|c| c.is_ascii_digit()) => self.number(),
            b'.' => {
                self.at += 1;
                Ok(Tok::Dot)
            }
            b'-' | b'+' if self.starts_number(1) => {
                self.at += 1;
                self.number()
            }
            b'0'..=b'9' => self.number(),
            _ if is_ident(b) => Ok(Tok::Ident(self.word())),
            _ => Err(LexError::Unexpected(b as char)),
        }
    }

    /// Whether a number starts `ahead` bytes on: a digit, or `.` and a digit.
    fn starts_number(&self, ahead: usize) -> bool {
        match self.peek(ahead) {
            Some(c) if c.is_ascii_digit() => true,
            Some(b'.') => self.peek(ahead + 1).is_some_and(|c| c.is_ascii_digit()),
            _ => false,
        }
    }

    fn word(&mut self) -> &'a str {
        let start = self.at;
        while self.peek(0).is_some_and(is_ident) {
            self.at += 1;
        }
        self.text.get(start..self.at).unwrap_or_default()
    }

    /// A number (its value does not matter): digits, letters, `_`, `.`, and a sign
    /// right after an exponent.
    fn number(&mut self) -> Result<Tok<'a>, LexError> {
        while let Some(b) = self.peek(0) {
            let sign = matches!(b, b'+' | b'-')
                && self.at > 0
                && matches!(self.text.as_bytes()[self.at - 1], b'e' | b'E' | b'p' | b'P');
            // A `.` only when a digit follows: `1.Values` is a number and a field
            // (which Go refuses), never one literal hiding the field.
            let point = b == b'.' && self.starts_number(0);
            if !(is_ident(b) || point || sign) {
                break;
            }
            self.at += 1;
        }
        Ok(Tok::Literal)
    }

    /// A `"…"` string or `'…'` character, with backslash escapes, on one line.
    fn quoted(&mut self, quote: u8) -> Result<Tok<'a>, LexError> {
        self.at += 1;
        loop {
            match self.peek(0) {
                None | Some(b'\n') => return Err(LexError::UnclosedString),
                Some(b'\\') => self.at += 2,
                Some(b) if b == quote => {
                    self.at += 1;
                    return Ok(Tok::Literal);
                }
                Some(_) => self.at += 1,
            }
        }
    }
}

/// Why a template's actions could not be split into tokens (the chart is then
/// taken as reading `global`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LexError {
    UnclosedComment,
    /// A `/* */` comment followed by more before the action's end.
    CommentWithMore,
    /// Parentheses nested past the reader's depth.
    TooDeep,
    UnclosedAction,
    /// A character no token starts with.
    Unexpected(char),
    UnclosedString,
    UnclosedRawString,
}

impl std::fmt::Display for LexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LexError::UnclosedComment => f.write_str("an unclosed comment"),
            LexError::CommentWithMore => f.write_str("a comment with more in its action"),
            LexError::TooDeep => f.write_str("parentheses nested too deep"),
            LexError::UnclosedAction => f.write_str("an unclosed action"),
            LexError::Unexpected(c) => write!(f, "an unexpected {c:?} in an action"),
            LexError::UnclosedString => f.write_str("an unclosed string"),
            LexError::UnclosedRawString => f.write_str("an unclosed raw string"),
        }
    }
}
