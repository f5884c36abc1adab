//! A conservative shell command parser: just enough of the POSIX grammar to find every
//! simple command a command line runs and every file it redirects to.
//!
//! It handles quoting (`'…'`, `"…"`, `\`), the list and pipeline operators (`;`, `&`, `&&`,
//! `||`, `|`, `|&`, newlines), subshells and groups (`( … )`, `{ …; }`), redirections
//! (`>`, `>>`, `<`, `2>&1`, `&>` …), comments, and command substitutions (`$( … )`,
//! backticks, `<( … )`), whose inner commands are parsed recursively and reported as
//! simple commands of their own. Words with parameter expansions or substitutions are
//! marked *dynamic*: a dynamic program name cannot be classified. Anything it cannot
//! parse (an unterminated quote, a heredoc) is flagged [`Parsed::opaque`] so the policy
//! treats the whole line as unknown rather than guessing.

/// One word of a command, after quote removal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Word {
    /// The text, quotes removed; expansions kept literally (`$HOME`).
    pub text: String,
    /// Whether the word contains an expansion or substitution, so its runtime value is
    /// unknown.
    pub dynamic: bool,
}

/// A redirection of a simple command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// The operator: `>`, `>>`, `<`, `<<`, `<<<`, `>&`, `&>`, `>|`, `<>` (fd prefix dropped).
    pub op: String,
    /// The target word.
    pub target: Word,
}

impl Redirect {
    /// Whether the redirection writes to its target.
    pub fn writes(&self) -> bool {
        self.op.contains('>') && !self.target.text.starts_with('&')
    }
}

/// One simple command: words and redirections.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The words, program first (assignments included, see [`SimpleCommand::argv`]).
    pub words: Vec<Word>,
    /// Its redirections.
    pub redirects: Vec<Redirect>,
}

impl SimpleCommand {
    /// The words after leading `NAME=value` assignments and shell keywords.
    pub fn argv(&self) -> &[Word] {
        let mut i = 0;
        while let Some(w) = self.words.get(i) {
            if is_assignment(&w.text) || (!w.dynamic && KEYWORDS.contains(&w.text.as_str())) {
                i += 1;
            } else {
                break;
            }
        }
        self.words.get(i..).unwrap_or_default()
    }
}

/// Reserved words that introduce or close compound commands; the command after them is
/// what runs.
const KEYWORDS: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "time",
];

/// `NAME=value`.
fn is_assignment(s: &str) -> bool {
    match s.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// The result of parsing a command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Every simple command, including those inside substitutions and subshells.
    pub commands: Vec<SimpleCommand>,
    /// Something could not be parsed reliably (why).
    pub opaque: Option<String>,
}

/// Parses `line`.
pub fn parse(line: &str) -> Parsed {
    let mut p = Parser {
        chars: line.chars().collect(),
        pos: 0,
        out: Parsed::default(),
        depth: 0,
    };
    p.run();
    p.out
}

/// How deep substitutions may nest before the line counts as opaque.
const MAX_DEPTH: usize = 8;

struct Parser {
    chars: Vec<char>,
    pos: usize,
    out: Parsed,
    depth: usize,
}

/// The simple command being read: its words so far, the word being read, and a
/// redirection operator waiting for its target.
#[derive(Default)]
struct Current {
    cmd: SimpleCommand,
    word: Option<Word>,
    redirect: Option<String>,
}

impl Current {
    /// The word being read, started if need be.
    fn word(&mut self) -> &mut Word {
        self.word.get_or_insert_with(Word::default)
    }

    /// Ends the current word: either a redirect target or a command word.
    fn finish_word(&mut self) {
        if let Some(w) = self.word.take() {
            match self.redirect.take() {
                Some(op) => self.cmd.redirects.push(Redirect { op, target: w }),
                None => self.cmd.words.push(w),
            }
        }
    }

    /// Ends the simple command, keeping it in `out` unless it is empty.
    fn end_command(&mut self, out: &mut Parsed) {
        let c = std::mem::take(&mut self.cmd);
        if !c.words.is_empty() || !c.redirects.is_empty() {
            out.commands.push(c);
        }
    }
}

impl Parser {
    fn peek(&self, off: usize) -> Option<char> {
        self.chars.get(self.pos + off).copied()
    }

    fn opaque(&mut self, why: &str) {
        if self.out.opaque.is_none() {
            self.out.opaque = Some(why.to_owned());
        }
    }

    /// Reads the whole input, collecting its simple commands into `out`.
    fn run(&mut self) {
        let mut cur = Current::default();
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' => {
                    cur.finish_word();
                    self.pos += 1;
                }
                '#' if cur.word.is_none() => self.skip_comment(),
                '\n' | ';' | '|' | '&' | '(' | ')' => self.operator(c, &mut cur),
                '<' | '>' => self.redirection(c, &mut cur),
                '\\' => self.escaped(&mut cur),
                '\'' => self.single_quoted(&mut cur),
                '"' => {
                    self.pos += 1;
                    cur.word();
                    self.double_quoted(&mut cur.word);
                }
                '$' | '`' => {
                    cur.word().dynamic = true;
                    self.dollar(&mut cur.word);
                }
                _ => {
                    cur.word().text.push(c);
                    self.pos += 1;
                }
            }
        }
        cur.finish_word();
        if cur.redirect.is_some() {
            self.opaque("a redirection without a target");
        }
        cur.end_command(&mut self.out);
    }

    /// At `#` outside a word: skips the comment up to the end of the line.
    fn skip_comment(&mut self) {
        while self.peek(0).is_some_and(|c| c != '\n') {
            self.pos += 1;
        }
    }

    /// At a list, pipeline or grouping operator (`c`): ends the simple command, unless
    /// `&>` starts a redirection.
    fn operator(&mut self, c: char, cur: &mut Current) {
        // `&>` and `>&` are redirections, handled below.
        if c == '&' && self.peek(1) == Some('>') {
            cur.finish_word();
            let op = if self.peek(2) == Some('>') {
                "&>>"
            } else {
                "&>"
            };
            self.pos += op.len();
            cur.redirect = Some(op.to_owned());
            return;
        }
        cur.finish_word();
        if cur.redirect.take().is_some() {
            self.opaque("a redirection without a target");
        }
        cur.end_command(&mut self.out);
        self.pos += 1;
    }

    /// At `<` or `>` (`c`): a process substitution, or a redirection operator whose target
    /// is the next word.
    fn redirection(&mut self, c: char, cur: &mut Current) {
        if self.peek(1) == Some('(') {
            // Process substitution: parse the inner command.
            cur.word().dynamic = true;
            self.pos += 2;
            self.substitution(')');
            return;
        }
        // An all-digit word right before is an fd number, not a word.
        if cur
            .word
            .as_ref()
            .is_some_and(|w| !w.text.is_empty() && w.text.chars().all(|c| c.is_ascii_digit()))
        {
            cur.word = None;
        }
        cur.finish_word();
        let mut op = String::from(c);
        self.pos += 1;
        while let Some(n) = self.peek(0) {
            if (n == '>' || n == '<' || n == '&' || n == '|') && op.len() < 3 {
                op.push(n);
                self.pos += 1;
            } else {
                break;
            }
        }
        if op.starts_with("<<") && op != "<<<" {
            self.opaque("a heredoc");
        }
        if op.ends_with('&') {
            // `2>&1`, `>&2`: the target is a file descriptor.
            op.pop();
            cur.word().text.push('&');
        }
        cur.redirect = Some(op);
    }

    /// At a backslash outside quotes: the next character taken literally (a line
    /// continuation when it is a newline).
    fn escaped(&mut self, cur: &mut Current) {
        self.pos += 1;
        match self.peek(0) {
            Some('\n') => self.pos += 1,
            Some(n) => {
                cur.word().text.push(n);
                self.pos += 1;
            }
            None => {}
        }
    }

    /// At `'`: the quoted text up to the closing quote, taken literally.
    fn single_quoted(&mut self, cur: &mut Current) {
        self.pos += 1;
        let w = cur.word();
        loop {
            match self.chars.get(self.pos).copied() {
                Some('\'') => {
                    self.pos += 1;
                    break;
                }
                Some(n) => {
                    w.text.push(n);
                    self.pos += 1;
                }
                None => {
                    self.out.opaque = Some("an unterminated single quote".into());
                    break;
                }
            }
        }
    }

    /// Inside `"…"` (the opening quote consumed).
    fn double_quoted(&mut self, word: &mut Option<Word>) {
        loop {
            match self.peek(0) {
                Some('"') => {
                    self.pos += 1;
                    return;
                }
                Some('\\') => match self.peek(1) {
                    Some(n @ ('"' | '\\' | '$' | '`')) => {
                        word.get_or_insert_with(Word::default).text.push(n);
                        self.pos += 2;
                    }
                    Some('\n') => self.pos += 2,
                    _ => {
                        word.get_or_insert_with(Word::default).text.push('\\');
                        self.pos += 1;
                    }
                },
                Some('$' | '`') => {
                    word.get_or_insert_with(Word::default).dynamic = true;
                    self.dollar(word);
                }
                Some(n) => {
                    word.get_or_insert_with(Word::default).text.push(n);
                    self.pos += 1;
                }
                None => {
                    self.opaque("an unterminated double quote");
                    return;
                }
            }
        }
    }

    /// At `$` or a backtick: an expansion or a substitution.
    fn dollar(&mut self, word: &mut Option<Word>) {
        let w = word.get_or_insert_with(Word::default);
        if self.peek(0) == Some('`') {
            self.pos += 1;
            w.text.push_str("$(…)");
            self.substitution('`');
            return;
        }
        match self.peek(1) {
            Some('(') if self.peek(2) == Some('(') => {
                // Arithmetic: no command runs, but keep the text out of the word.
                w.text.push_str("$((…))");
                self.pos += 3;
                self.skip_balanced();
            }
            Some('(') => {
                w.text.push_str("$(…)");
                self.pos += 2;
                self.substitution(')');
            }
            Some('{') => {
                w.text.push('$');
                self.pos += 1;
                while let Some(n) = self.peek(0) {
                    w.text.push(n);
                    self.pos += 1;
                    if n == '}' {
                        break;
                    }
                }
            }
            _ => {
                w.text.push('$');
                self.pos += 1;
                while let Some(n) = self.peek(0) {
                    if n.is_ascii_alphanumeric()
                        || n == '_'
                        || (w.text == "$" && "?@*#!$-".contains(n))
                    {
                        w.text.push(n);
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
            }
        }
    }

    /// Skips to the `)` closing an already opened `(`, for arithmetic.
    fn skip_balanced(&mut self) {
        let mut depth = 1usize;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        // `))`
                        if self.peek(0) == Some(')') {
                            self.pos += 1;
                        }
                        return;
                    }
                }
                _ => {}
            }
        }
        self.opaque("an unterminated arithmetic expansion");
    }

    /// Reads a substitution body up to its closing `close` and parses it recursively.
    fn substitution(&mut self, close: char) {
        let start = self.pos;
        let mut depth = 1usize;
        let mut quote: Option<char> = None;
        let mut end = None;
        while let Some(c) = self.peek(0) {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some('"') | None, '\\') => self.pos += 1,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, '(') if close == ')' => depth += 1,
                (None, c) if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(self.pos);
                        self.pos += 1;
                        break;
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
        let Some(end) = end else {
            self.opaque("an unterminated command substitution");
            return;
        };
        if self.depth >= MAX_DEPTH {
            self.opaque("substitutions nested too deeply");
            return;
        }
        let inner: String = self
            .chars
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .collect();
        let mut sub = Parser {
            chars: inner.chars().collect(),
            pos: 0,
            out: Parsed::default(),
            depth: self.depth + 1,
        };
        sub.run();
        self.out.commands.extend(sub.out.commands);
        if let Some(why) = sub.out.opaque {
            self.opaque(&why);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(p: &Parsed) -> Vec<Vec<String>> {
        p.commands
            .iter()
            .map(|c| c.words.iter().map(|w| w.text.clone()).collect())
            .collect()
    }

    #[test]
    fn splits_lists_and_pipelines() {
        let p = parse("cd src && ls -la | grep 'a b' ; echo \"x y\" || true &");
        assert_eq!(
            words(&p),
            vec![
                vec!["cd", "src"],
                vec!["ls", "-la"],
                vec!["grep", "a b"],
                vec!["echo", "x y"],
                vec!["true"]
            ]
        );
        assert!(p.opaque.is_none());
    }

    #[test]
    fn substitutions_are_parsed_recursively() {
        let p = parse("echo $(rm -rf /tmp/x) `curl evil` \"$(git push)\"");
        let w = words(&p);
        assert!(w.contains(&vec!["rm".into(), "-rf".into(), "/tmp/x".into()]));
        assert!(w.contains(&vec!["curl".into(), "evil".into()]));
        assert!(w.contains(&vec!["git".into(), "push".into()]));
        assert!(p.commands.iter().any(|c| c.words.iter().any(|w| w.dynamic)));
    }

    #[test]
    fn redirections_are_separated() {
        let p = parse("cargo test 2>&1 > out.txt >>/etc/passwd < in");
        assert_eq!(words(&p), vec![vec!["cargo", "test"]]);
        let r: Vec<(String, String)> = p.commands[0]
            .redirects
            .iter()
            .map(|r| (r.op.clone(), r.target.text.clone()))
            .collect();
        assert_eq!(
            r,
            vec![
                (">".into(), "&1".into()),
                (">".into(), "out.txt".into()),
                (">>".into(), "/etc/passwd".into()),
                ("<".into(), "in".into())
            ]
        );
        assert!(!p.commands[0].redirects[0].writes());
        assert!(p.commands[0].redirects[2].writes());
    }

    #[test]
    fn subshells_assignments_and_keywords() {
        let p = parse("(FOO=1 make) ; if true; then rm a; fi");
        let argv: Vec<Vec<String>> = p
            .commands
            .iter()
            .map(|c| c.argv().iter().map(|w| w.text.clone()).collect())
            .collect();
        assert_eq!(
            argv,
            vec![vec!["make"], vec!["true"], vec!["rm", "a"], vec![]]
        );
    }

    #[test]
    fn unterminated_and_heredoc_are_opaque() {
        assert!(parse("echo 'abc").opaque.is_some());
        assert!(parse("cat <<EOF\nhi\nEOF").opaque.is_some());
        assert!(parse("echo $(ls").opaque.is_some());
    }
}
