//! The one reader of what a pane's agent spends (tokens and cost) and how much of its usage
//! window is used (issue 44, spec §14).
//!
//! Every harness publishes its numbers somewhere of its own: a transcript of JSON lines, a
//! session file, the JSON its status-line command receives. The adapter declares where, as data
//! (`adapters/<name>/declaration.json`, sections `spend` and `quota`): the file's kind, a path
//! pattern under the harness's home or the pane's state directory, which rows count, and the
//! JSON pointer of each number. This module reads any such declaration; it knows no harness.
//!
//! A harness that publishes a number nowhere gets `None` for it, or the whole section
//! [`Reading::Unsupported`] with the adapter's reason: never a zero that nobody published. A
//! file that does not parse as declared is an [`Error::MeterFile`] naming the file, the line and
//! the problem.
//!
//! A [`Reader`] follows its files as they grow: each [`Reader::spend`] or [`Reader::quota`]
//! reads only the bytes written since the last one (the tail), keeps a line cut off mid-write
//! for the next poll, and starts over when the file is replaced or truncated.
//!
//! The parts: [`Section`] (in `declaration.rs`) parses an adapter's section; `files.rs` finds
//! the pane's file from its path pattern; this file reads its rows.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};

mod declaration;
mod files;

pub use declaration::Section;
use declaration::{Field, Kind, Pointers, Root, Source, Window};
use files::{file_identity, fill, first_row_matches, matching_files};

/// The most a single poll reads from one file, so a huge transcript is taken in bounded steps
/// (the next poll goes on where this one stopped).
const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

/// How many files a path pattern may match before the reader refuses it: a pattern that
/// matches more is too broad to pick the pane's file from.
pub(super) const MAX_CANDIDATES: usize = 10_000;

/// Where a pane's files are: the harness's home, the pane's working directory and the pane's
/// belfry state directory (where belfry saves what a harness hands its status-line command).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// The harness's home directory (`$HOME` of the pane), if known.
    pub home: Option<PathBuf>,
    /// The pane's working directory, as the harness saw it at launch.
    pub cwd: PathBuf,
    /// The pane's belfry state directory, if it has one.
    pub state: Option<PathBuf>,
}

/// Tokens and cost, in total or for one model response.
///
/// `input` counts the prompt tokens read fresh, without the cached ones: a harness that reports
/// one prompt total with the cache inside it (`input_counts_cache` in its declaration) has the
/// cache subtracted. Each `None` is a number the harness does not publish.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tokens {
    /// Prompt tokens read fresh.
    pub input: Option<u64>,
    /// Tokens the model wrote.
    pub output: Option<u64>,
    /// Prompt tokens served from the prompt cache.
    pub cache_read: Option<u64>,
    /// Prompt tokens written to the prompt cache.
    pub cache_write: Option<u64>,
    /// The cost in US dollars, as the harness states it.
    pub cost_usd: Option<f64>,
}

/// What a pane's agent has spent: the totals and each model response's share.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spend {
    /// The session's totals.
    pub total: Tokens,
    /// One entry per model response the files list, oldest first (empty where the harness
    /// publishes only running totals).
    pub per_turn: Vec<Tokens>,
    /// The numbers the adapter declares unpublished, each with its reason.
    pub unsupported: BTreeMap<String, String>,
    /// The files read.
    pub files: Vec<PathBuf>,
}

/// The usage window: how much is used of what limit, and when it resets.
#[derive(Clone, Debug, PartialEq)]
pub struct Quota {
    /// How much is used, in `unit`.
    pub used: f64,
    /// The limit, in `unit`.
    pub limit: f64,
    /// What `used` and `limit` count (`percent`, `tokens`, `usd`).
    pub unit: String,
    /// When the window resets, in seconds since the epoch.
    pub resets_at: u64,
    /// The file it was read from.
    pub file: PathBuf,
}

/// The outcome of reading a section.
#[derive(Clone, Debug, PartialEq)]
pub enum Reading<T> {
    /// The numbers.
    Read(T),
    /// The harness publishes nothing for this section; the adapter's reason.
    Unsupported(String),
    /// No declared file holds the numbers yet (the harness has not written one, or has not
    /// written these numbers into it): the patterns looked for, or the files read.
    NotYet(Vec<String>),
}

/// The JSON value a pointer finds, `None` for a missing or null one.
fn at<'v>(row: &'v Value, pointer: &str) -> Option<&'v Value> {
    row.pointer(pointer).filter(|value| !value.is_null())
}

pub(super) fn matches_all(row: &Value, pairs: &[(String, Value)], cwd: &Path) -> bool {
    pairs.iter().all(|(pointer, want)| {
        let want = match want {
            Value::String(text) => Value::String(fill(text, cwd)),
            other => other.clone(),
        };
        row.pointer(pointer) == Some(&want)
    })
}

/// What one source has taken in so far from its file.
#[derive(Debug, Default)]
struct Tally {
    sums: Sums,
    per_turn: Vec<Tokens>,
    last_total: Option<Tokens>,
    last_window: Option<Quota>,
    seen_ids: BTreeSet<String>,
}

/// Sums of the per-turn numbers; a number any counted row lacks is unpublished.
#[derive(Debug, Default)]
struct Sums {
    rows: u64,
    input: Option<u64>,
    output: Option<u64>,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
    cost_usd: Option<f64>,
    missing: BTreeSet<&'static str>,
}

/// A source being followed: its file, how far it has been read, and its tally.
#[derive(Debug)]
struct Follow {
    source: Source,
    file: Option<PathBuf>,
    offset: u64,
    /// The bytes after the last newline read: a line still being written.
    partial: Vec<u8>,
    /// The 1-based number of the next whole line.
    line: u64,
    /// The file's identity when it was opened, to notice it being replaced.
    identity: Option<(u64, u64)>,
    tally: Tally,
}

/// Follows the files one section declares and gives its numbers on each poll.
#[derive(Debug)]
pub struct Reader {
    section: &'static str,
    follows: Result<Vec<Follow>, String>,
    unsupported_fields: BTreeMap<String, String>,
    place: Place,
}

impl Reader {
    /// A reader of `section` (parsed by [`Section::from_declaration`] under the name `spend`
    /// or `quota`) for the pane at `place`.
    pub fn new(name: &'static str, section: Section, place: Place) -> Reader {
        let follows = section.sources.map(|sources| {
            sources
                .into_iter()
                .map(|source| Follow {
                    source,
                    file: None,
                    offset: 0,
                    partial: Vec::new(),
                    line: 1,
                    identity: None,
                    tally: Tally::default(),
                })
                .collect()
        });
        Reader {
            section: name,
            follows,
            unsupported_fields: section.unsupported_fields,
            place,
        }
    }

    /// Reads what the files gained since the last poll and gives the spend so far.
    pub fn spend(&mut self) -> Result<Reading<Spend>> {
        let unsupported = self.unsupported_fields.clone();
        let (read, looked_for) = match self.poll()? {
            Ok(read) => read,
            Err(reason) => return Ok(Reading::Unsupported(reason)),
        };
        if read.is_empty() {
            return Ok(Reading::NotYet(looked_for));
        }
        let mut spend = Spend {
            unsupported,
            ..Spend::default()
        };
        // The sources are in the adapter's order of preference: each number comes from the
        // first source that publishes it.
        for follow in read {
            let tally = &follow.tally;
            let summed = tally.sums.tokens(&follow.source.per_turn);
            let total = tally.last_total.clone().unwrap_or_default();
            let merge = |slot: &mut Option<u64>, total: Option<u64>, summed: Option<u64>| {
                if slot.is_none() {
                    *slot = total.or(summed);
                }
            };
            merge(&mut spend.total.input, total.input, summed.input);
            merge(&mut spend.total.output, total.output, summed.output);
            merge(
                &mut spend.total.cache_read,
                total.cache_read,
                summed.cache_read,
            );
            merge(
                &mut spend.total.cache_write,
                total.cache_write,
                summed.cache_write,
            );
            if spend.total.cost_usd.is_none() {
                spend.total.cost_usd = total.cost_usd.or(summed.cost_usd);
            }
            if spend.per_turn.is_empty() {
                spend.per_turn = tally.per_turn.clone();
            }
            if let Some(file) = &follow.file {
                spend.files.push(file.clone());
            }
        }
        Ok(Reading::Read(spend))
    }

    /// Reads what the files gained since the last poll and gives the latest usage window.
    pub fn quota(&mut self) -> Result<Reading<Quota>> {
        let (read, looked_for) = match self.poll()? {
            Ok(read) => read,
            Err(reason) => return Ok(Reading::Unsupported(reason)),
        };
        let latest = read
            .into_iter()
            .find_map(|follow| follow.tally.last_window.clone());
        Ok(match latest {
            Some(quota) => Reading::Read(quota),
            None => Reading::NotYet(looked_for),
        })
    }

    /// Polls every source; gives those with a file (and the patterns of those without), or
    /// the section's unsupported reason.
    #[allow(clippy::type_complexity)]
    fn poll(&mut self) -> Result<Result<(Vec<&Follow>, Vec<String>), String>> {
        let follows = match &mut self.follows {
            Ok(follows) => follows,
            Err(reason) => return Ok(Err(reason.clone())),
        };
        let mut looked_for = Vec::new();
        for follow in follows.iter_mut() {
            follow.poll(&self.place, self.section)?;
            if follow.file.is_none() {
                looked_for.push(follow.pattern(&self.place));
            }
        }
        Ok(Ok((
            follows
                .iter()
                .filter(|follow| follow.file.is_some())
                .collect(),
            looked_for,
        )))
    }
}

impl Sums {
    /// The sums of the numbers `declared` names: a declared number no row lacked is its sum
    /// (zero over no rows: the file lists no response yet), any other is unpublished.
    fn tokens(&self, declared: &Pointers) -> Tokens {
        let keep = |name: &str, pointer: &Option<String>, sum: Option<u64>| {
            (pointer.is_some() && !self.missing.contains(name)).then(|| sum.unwrap_or(0))
        };
        Tokens {
            input: keep("input", &declared.input, self.input),
            output: keep("output", &declared.output, self.output),
            cache_read: keep("cache_read", &declared.cache_read, self.cache_read),
            cache_write: keep("cache_write", &declared.cache_write, self.cache_write),
            cost_usd: (declared.cost_usd.is_some() && !self.missing.contains("cost_usd"))
                .then(|| self.cost_usd.unwrap_or(0.0)),
        }
    }
}

impl Follow {
    fn root(&self, place: &Place) -> Option<PathBuf> {
        match self.source.root {
            Root::Home => place.home.clone(),
            Root::Cwd => Some(place.cwd.clone()),
            Root::State => place.state.clone(),
        }
    }

    fn pattern(&self, place: &Place) -> String {
        let root = match self.source.root {
            Root::Home => "{home}",
            Root::Cwd => "{cwd}",
            Root::State => "{state}",
        };
        format!("{root}/{}", fill(&self.source.path, &place.cwd))
    }

    /// Finds the pane's file (the newest match whose first row matches), and reads its tail.
    fn poll(&mut self, place: &Place, section: &'static str) -> Result<()> {
        let Some(root) = self.root(place) else {
            return Ok(());
        };
        let pattern = fill(&self.source.path, &place.cwd);
        let mut candidates: Vec<(std::time::SystemTime, PathBuf)> =
            matching_files(&root, &pattern)?
                .into_iter()
                .map(|path| {
                    let modified = std::fs::metadata(&path)
                        .and_then(|meta| meta.modified())
                        .unwrap_or(std::time::UNIX_EPOCH);
                    (modified, path)
                })
                .collect();
        // Newest first; the name breaks a tie so the choice never depends on listing order.
        candidates.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
        let mut chosen = None;
        for (_, path) in candidates {
            if self.source.first_row.is_empty()
                || first_row_matches(&path, &self.source.first_row, &place.cwd)?
            {
                chosen = Some(path);
                break;
            }
        }
        let Some(path) = chosen else {
            return Ok(());
        };
        let identity = file_identity(&path)?;
        let len = std::fs::metadata(&path)
            .map_err(|err| Error::io("read the size of", &path, err))?
            .len();
        let replaced = self.file.as_ref() != Some(&path)
            || self.identity != Some(identity)
            || len < self.offset;
        // A whole-JSON file is read whole each time it changes; a JSONL file from where the last
        // poll stopped, unless it was replaced or cut shorter.
        if replaced || self.source.kind == Kind::Json {
            self.file = Some(path.clone());
            self.identity = Some(identity);
            self.offset = 0;
            self.partial.clear();
            self.line = 1;
            self.tally = Tally::default();
        }
        match self.source.kind {
            Kind::Json => self.read_whole(&path, section),
            Kind::Jsonl => self.read_tail(&path, len, section),
        }
    }

    fn read_whole(&mut self, path: &Path, section: &'static str) -> Result<()> {
        // A whole-JSON source is a small document (a status line); one past the read bound is
        // not the file declared.
        let len = std::fs::metadata(path)
            .map_err(|err| Error::io("read the size of", path, err))?
            .len();
        if len > MAX_READ_BYTES {
            return Err(Error::MeterFile {
                path: path.to_path_buf(),
                line: None,
                problem: format!(
                    "is {len} bytes, more than the {MAX_READ_BYTES} a JSON source may be"
                ),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|err| Error::io("read", path, err))?;
        let row: Value = serde_json::from_str(&text).map_err(|err| Error::MeterFile {
            path: path.to_path_buf(),
            line: None,
            problem: format!("is not JSON: {err}"),
        })?;
        self.take_row(&row, path, None, section)
    }

    fn read_tail(&mut self, path: &Path, len: u64, section: &'static str) -> Result<()> {
        if len == self.offset {
            return Ok(());
        }
        let mut file = File::open(path).map_err(|err| Error::io("open", path, err))?;
        file.seek(SeekFrom::Start(self.offset))
            .map_err(|err| Error::io("seek in", path, err))?;
        let want = (len - self.offset).min(MAX_READ_BYTES);
        let mut bytes = Vec::with_capacity(want as usize);
        file.take(want)
            .read_to_end(&mut bytes)
            .map_err(|err| Error::io("read", path, err))?;
        self.offset += bytes.len() as u64;
        let mut data = std::mem::take(&mut self.partial);
        data.extend_from_slice(&bytes);
        let mut start = 0;
        while let Some(newline) = data[start..].iter().position(|byte| *byte == b'\n') {
            let line = &data[start..start + newline];
            start += newline + 1;
            let number = self.line;
            self.line += 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let row: Value = serde_json::from_slice(line).map_err(|err| Error::MeterFile {
                path: path.to_path_buf(),
                line: Some(number),
                problem: format!("is not a JSON line: {err}"),
            })?;
            self.take_row(&row, path, Some(number), section)?;
        }
        // The bytes after the last newline are a line still being written; the next poll
        // finishes it.
        self.partial = data[start..].to_vec();
        Ok(())
    }

    fn take_row(
        &mut self,
        row: &Value,
        path: &Path,
        line: Option<u64>,
        section: &'static str,
    ) -> Result<()> {
        let source = &self.source;
        let cwd = Path::new("");
        if !matches_all(row, &source.when, cwd)
            || (!source.unless.is_empty()
                && source
                    .unless
                    .iter()
                    .any(|pair| matches_all(row, std::slice::from_ref(pair), cwd)))
            || source
                .present
                .iter()
                .any(|pointer| at(row, pointer).is_none())
        {
            return Ok(());
        }
        if let Some(pointer) = &source.dedupe {
            if let Some(id) = at(row, pointer) {
                if !self.tally.seen_ids.insert(id.to_string()) {
                    return Ok(());
                }
            }
        }
        let bad = |problem: String| Error::MeterFile {
            path: path.to_path_buf(),
            line,
            problem,
        };
        if section == "quota" {
            if let Some(window) = &source.window {
                self.tally.last_window = Some(read_window(row, window, path).map_err(bad)?);
            }
            return Ok(());
        }
        if !source.per_turn.is_empty() {
            let (tokens, missing) =
                read_tokens(row, &source.per_turn, source.input_counts_cache).map_err(bad)?;
            let sums = &mut self.tally.sums;
            sums.rows += 1;
            sums.missing.extend(missing);
            add(&mut sums.input, tokens.input);
            add(&mut sums.output, tokens.output);
            add(&mut sums.cache_read, tokens.cache_read);
            add(&mut sums.cache_write, tokens.cache_write);
            if let Some(cost) = tokens.cost_usd {
                sums.cost_usd = Some(sums.cost_usd.unwrap_or(0.0) + cost);
            }
            self.tally.per_turn.push(tokens);
        }
        if !source.total.is_empty() {
            let (tokens, _) =
                read_tokens(row, &source.total, source.input_counts_cache).map_err(bad)?;
            self.tally.last_total = Some(tokens);
        }
        Ok(())
    }
}

fn add(sum: &mut Option<u64>, value: Option<u64>) {
    if let Some(value) = value {
        *sum = Some(sum.unwrap_or(0).saturating_add(value));
    }
}

/// The token and cost numbers a row holds at `pointers`, and the names of those it lacks.
fn read_tokens(
    row: &Value,
    pointers: &Pointers,
    input_counts_cache: bool,
) -> Result<(Tokens, Vec<&'static str>), String> {
    let mut missing = Vec::new();
    let mut count = |name: &'static str, pointer: &Option<String>| -> Result<Option<u64>, String> {
        let Some(pointer) = pointer else {
            return Ok(None);
        };
        match at(row, pointer) {
            None => {
                missing.push(name);
                Ok(None)
            }
            Some(value) => whole(value).map(Some).ok_or(format!(
                "{pointer} is not a whole number of tokens: {value}"
            )),
        }
    };
    let mut tokens = Tokens {
        input: count("input", &pointers.input)?,
        output: count("output", &pointers.output)?,
        cache_read: count("cache_read", &pointers.cache_read)?,
        cache_write: count("cache_write", &pointers.cache_write)?,
        cost_usd: None,
    };
    if let Some(pointer) = &pointers.cost_usd {
        match at(row, pointer) {
            None => missing.push("cost_usd"),
            Some(value) => {
                tokens.cost_usd = Some(
                    value
                        .as_f64()
                        .filter(|cost| *cost >= 0.0)
                        .ok_or(format!("{pointer} is not a cost: {value}"))?,
                )
            }
        }
    }
    // A prompt total with the cache inside it: the fresh part is what remains.
    if input_counts_cache {
        if let Some(input) = tokens.input {
            let cached = tokens.cache_read.unwrap_or(0) + tokens.cache_write.unwrap_or(0);
            tokens.input = Some(input.checked_sub(cached).ok_or(format!(
                "the prompt total {input} is smaller than its cached part {cached}"
            ))?);
        }
    }
    Ok((tokens, missing))
}

fn read_window(row: &Value, window: &Window, path: &Path) -> Result<Quota, String> {
    let number = |field: &Field| -> Result<f64, String> {
        match field {
            Field::Number(number) => Ok(*number),
            Field::Pointer(pointer) => at(row, pointer)
                .and_then(Value::as_f64)
                .ok_or(format!("{pointer} is not a number")),
        }
    };
    let resets_at = at(row, &window.resets_at).and_then(whole).ok_or(format!(
        "{} is not a time in whole seconds since the epoch",
        window.resets_at
    ))?;
    Ok(Quota {
        used: number(&window.used)?,
        limit: number(&window.limit)?,
        unit: window.unit.clone(),
        resets_at,
        file: path.to_path_buf(),
    })
}

/// A whole non-negative number, written as an integer or as a float without a fraction.
fn whole(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|number| *number >= 0.0 && number.fract() == 0.0 && *number < 9.0e15)
            .map(|number| number as u64)
    })
}
