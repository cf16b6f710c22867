//! The projection data of each adapter: its capability matrix (`matrix.json`) and its
//! renderer's shape (`render.json` plus templates), built into the binary by `build.rs`
//! (spec §9–§10). Everything a renderer needs to know about a harness arrives here as data;
//! this module only reads and checks it.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_projection.rs"));
}

/// One matrix cell's status.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Exact,
    Lossy,
    Inert,
    Unsupported,
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Exact => "exact",
            Status::Lossy => "lossy",
            Status::Inert => "inert",
            Status::Unsupported => "unsupported",
        }
    }
}

/// One cell: a semantic feature on one harness.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    pub status: Status,
    /// What is lost (lossy cells).
    #[serde(default)]
    pub loss: Option<String>,
    /// Why it cannot work (unsupported and inert cells).
    #[serde(default)]
    pub reason: Option<String>,
    /// The stable degradation key of a lossy or unsupported cell.
    #[serde(default)]
    pub key: Option<String>,
}

impl Cell {
    /// `exact`, `lossy: …`, `unsupported: …` as plan and matrix print it.
    pub fn describe(&self) -> String {
        let detail = self.loss.as_deref().or(self.reason.as_deref());
        match (detail, &self.key) {
            (Some(detail), Some(key)) => format!("{}: {detail} [{key}]", self.status.as_str()),
            (Some(detail), None) => format!("{}: {detail}", self.status.as_str()),
            _ => self.status.as_str().to_string(),
        }
    }
}

/// The versions a matrix admits: one span `min <= version < below` (dotted numbers), or
/// several side by side when a harness's majors differ enough to be verified apart (a list in
/// `matrix.json`). A version is admitted when any span holds it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "AdmittedSpans")]
pub struct VersionRange {
    pub spans: Vec<VersionSpan>,
}

/// One span of admitted versions, and the version it was verified with when the matrix has
/// more than one span.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionSpan {
    pub min: String,
    pub below: String,
    #[serde(default)]
    pub verified_with: Option<String>,
}

/// How `matrix.json` writes `admitted`: one object, or a non-empty list of them.
#[derive(Deserialize)]
#[serde(untagged)]
enum AdmittedSpans {
    One(VersionSpan),
    Many(Vec<VersionSpan>),
}

impl TryFrom<AdmittedSpans> for VersionRange {
    type Error = String;

    fn try_from(spans: AdmittedSpans) -> Result<Self, Self::Error> {
        let spans = match spans {
            AdmittedSpans::One(span) => vec![span],
            AdmittedSpans::Many(spans) => spans,
        };
        if spans.is_empty() {
            return Err("admitted is an empty list: write one {min, below} span or more".into());
        }
        Ok(VersionRange { spans })
    }
}

impl VersionRange {
    /// One span `[min, below)`.
    pub fn one(min: &str, below: &str) -> VersionRange {
        VersionRange {
            spans: vec![VersionSpan {
                min: min.into(),
                below: below.into(),
                verified_with: None,
            }],
        }
    }

    pub fn admits(&self, version: &str) -> bool {
        self.spans.iter().any(|span| span.admits(version))
    }

    /// The lowest admitted version named first (what a matrix without `verified_with` pins).
    pub fn min(&self) -> &str {
        self.spans.first().map_or("", |span| span.min.as_str())
    }

    pub fn describe(&self) -> String {
        self.spans
            .iter()
            .map(|span| format!(">={} <{}", span.min, span.below))
            .collect::<Vec<_>>()
            .join(" or ")
    }
}

impl VersionSpan {
    fn admits(&self, version: &str) -> bool {
        let (Some(version), Some(min), Some(below)) = (
            parse_version(version),
            parse_version(&self.min),
            parse_version(&self.below),
        ) else {
            return false;
        };
        min <= version && version < below
    }
}

/// Whether `version` is at least `min`, as dotted numbers; `None` when either does not parse.
pub fn at_least(version: &str, min: &str) -> Option<bool> {
    Some(parse_version(version)? >= parse_version(min)?)
}

fn parse_version(text: &str) -> Option<Vec<u64>> {
    let core = text.trim().split(['-', '+', ' ']).next()?;
    core.split('.').map(|part| part.parse().ok()).collect()
}

/// A harness with no build to verify against: every feature is unsupported with one key.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotAdmitted {
    pub reason: String,
    pub key: String,
}

/// One adapter's capability matrix.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    pub version: u32,
    pub adapter: String,
    pub harness: String,
    pub admitted: Option<VersionRange>,
    pub verified_with: Option<String>,
    #[serde(default)]
    pub sources: Vec<String>,
    #[serde(default)]
    pub not_admitted: Option<NotAdmitted>,
    /// The argv that prints the installed harness's version (`--version`), if it has one.
    #[serde(default)]
    pub detect: Vec<String>,
    /// The npm package names the harness is published as (a package that moved at a new major
    /// has both): the version is read from the `package.json` of the one the program lies in,
    /// without running it.
    #[serde(default)]
    pub detect_packages: Vec<String>,
    pub cells: BTreeMap<String, Cell>,
}

impl Matrix {
    /// The cell of `feature`; a feature the matrix does not list is unsupported, and a
    /// harness that is not admitted is unsupported everywhere.
    pub fn cell(&self, feature: &str) -> Cell {
        if let Some(not_admitted) = &self.not_admitted {
            return Cell {
                status: Status::Unsupported,
                loss: None,
                reason: Some(not_admitted.reason.clone()),
                key: Some(not_admitted.key.clone()),
            };
        }
        self.cells.get(feature).cloned().unwrap_or_else(|| Cell {
            status: Status::Unsupported,
            loss: None,
            reason: Some(format!(
                "the matrix of {} has no cell {feature:?}",
                self.adapter
            )),
            key: None,
        })
    }
}

/// How a settings file marks hooks as disabled: the value at a JSON pointer.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InertRule {
    /// Settings files to check besides the target's own (`$VAR`s allowed; relative to the
    /// project).
    #[serde(default)]
    pub paths: Vec<String>,
    pub pointer: String,
    pub equals: Value,
    pub reason: String,
}

/// Where a harness records which hook entries it trusts, and how it hashes one.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustRule {
    /// The TOML file, with `$VAR` placeholders.
    pub file: String,
    /// The table under which one sub-table per entry key holds the hash.
    pub table: String,
    pub field: String,
    /// Native event name → the label used in entry keys and hashes.
    pub event_labels: BTreeMap<String, String>,
    /// Handler fields left out of the hashed identity.
    #[serde(default)]
    pub hash_omit: Vec<String>,
    pub untrusted: String,
    pub modified: String,
    #[serde(default)]
    pub project_trust: Option<ProjectTrust>,
}

/// A harness setting that must mark the project directory trusted for its layer to load.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectTrust {
    pub table: String,
    pub field: String,
    pub equals: String,
    pub reason: String,
}

/// A harness that loads a project's settings (and so its hooks) only in a folder the user
/// trusts, recorded in a JSON map of folder path → trust level (a string or a boolean; `null`
/// is no entry); the longest matching path decides. Project scope only.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FolderTrust {
    /// The JSON file of folder → level (`$VAR`s allowed).
    pub file: String,
    /// Levels that trust the folder itself.
    pub trusted: Vec<Value>,
    /// Levels that trust the parent of the named path (so its siblings too).
    #[serde(default)]
    pub parent: Vec<Value>,
    /// A settings value that turns folder trust off (every folder trusted).
    #[serde(default)]
    pub disabled_by: Option<InertRule>,
    /// A settings value that trusts a folder no entry of the file decides.
    #[serde(default)]
    pub fallback: Option<InertRule>,
    /// For a harness whose folder trust is off unless a setting turns it on: the folder is
    /// checked only when one of these files holds this value, and every folder is trusted
    /// otherwise (an absent setting included).
    #[serde(default)]
    pub enabled_by: Option<InertRule>,
    /// Environment variables that trust every folder, with the value that does.
    #[serde(default)]
    pub env_trusted: BTreeMap<String, String>,
    /// The first harness version that asks for trust (older ones load the project as it is).
    #[serde(default)]
    pub from_version: Option<String>,
    /// What `apply --trust` records for the project's canonical path, the way the harness
    /// records the user's own decision; without it `--trust` writes nothing here.
    #[serde(default)]
    pub write: Option<FolderTrustWrite>,
    pub reason: String,
}

/// How `apply --trust` writes a folder-trust entry the harness reads as the user's decision.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FolderTrustWrite {
    /// The level written for the project's canonical path.
    pub value: Value,
    /// A directory the harness creates (and removes) around its own reads and writes of the
    /// file, as a lock (`$VAR`s allowed): belfry takes it the same way.
    #[serde(default)]
    pub lock_dir: Option<String>,
    /// Where the value comes from.
    pub why: String,
}

/// A harness that runs hooks only for a project whose entry in a JSON map (keyed by folder
/// path) has a flag set, such as an accepted workspace-trust dialog. Project scope only.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectFlag {
    /// The JSON file (`$VAR`s allowed).
    pub file: String,
    /// Where the folder-keyed map is in it (`/projects`).
    pub map_pointer: String,
    pub field: String,
    pub equals: Value,
    /// Whether an ancestor folder's flag counts for the project.
    #[serde(default)]
    pub ancestors: bool,
    pub reason: String,
}

/// Which JSON a harness reads its settings file as.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JsonDialect {
    /// Strict JSON: a comment or a trailing comma makes the whole file unread.
    #[default]
    Strict,
    /// Comments are stripped, then strict JSON: a trailing comma still makes it unread.
    Comments,
    /// Comments and trailing commas are both accepted.
    Jsonc,
}

/// The native field names of a handler entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandlerFields {
    pub command: String,
    pub timeout: String,
    #[serde(default)]
    pub command_windows: Option<String>,
    #[serde(default, rename = "async")]
    pub async_field: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
}

/// The native events one semantic event is projected to: usually one, and more where a
/// harness splits one semantic event over several of its own (a shell guard must also run
/// where the harness runs shell commands outside its tool calls). Each gets the same entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum NativeEvents {
    One(String),
    Many(Vec<String>),
}

impl NativeEvents {
    /// The native event names, in the order the data lists them.
    pub fn names(&self) -> &[String] {
        match self {
            NativeEvents::One(name) => std::slice::from_ref(name),
            NativeEvents::Many(names) => names,
        }
    }
}

/// The unit of a native timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeoutUnit {
    Seconds,
    Milliseconds,
}

/// Where a target's native file is, per scope, with `$VAR` placeholders for the user scope.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Paths {
    pub project: String,
    pub user: String,
    /// Values for `$VAR`s the environment does not set (`"XDG_CONFIG_HOME": "$HOME/.config"`).
    #[serde(default)]
    pub defaults: BTreeMap<String, String>,
}

/// A renderer's shape. The variants differ in size; there are a handful of them per run.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
#[allow(clippy::large_enum_variant)]
pub enum Render {
    /// A JSON(C) settings file with `hooks_key.<NativeEvent>[] = {matcher?, hooks:[handler]}`.
    SettingsJson {
        version: u32,
        paths: Paths,
        #[serde(default)]
        source: String,
        hooks_key: String,
        /// Semantic event → the native event (or events) whose entries call dispatch for it.
        events: BTreeMap<String, NativeEvents>,
        timeout_unit: TimeoutUnit,
        /// Per semantic event, the most a harness allows.
        #[serde(default)]
        max_timeout_ms: BTreeMap<String, u64>,
        /// Fixed fields of every handler (`{"type": "command"}`).
        handler: serde_json::Map<String, Value>,
        fields: HandlerFields,
        #[serde(default)]
        inert: Vec<InertRule>,
        #[serde(default)]
        trust: Option<TrustRule>,
        #[serde(default)]
        folder_trust: Option<FolderTrust>,
        #[serde(default)]
        project_flag: Option<ProjectFlag>,
        /// How the harness reads the file; belfry keeps what the user wrote, and `status`
        /// says when the harness cannot read it.
        #[serde(default)]
        json: JsonDialect,
    },
    /// A file belfry owns whole, generated from a template.
    GeneratedFile {
        version: u32,
        paths: Paths,
        #[serde(default)]
        source: String,
        template: String,
        /// The folder trust the harness needs before it loads the generated file.
        #[serde(default)]
        folder_trust: Option<FolderTrust>,
        /// What the file must contain for a harness version to run it: a file written for
        /// another major (by an older belfry) loads but registers nothing there.
        #[serde(default)]
        entry_points: Vec<EntryPoint>,
    },
}

/// The text a generated file needs for the harness versions `[min, below)` to run it, and
/// why a file without it does nothing there.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryPoint {
    pub min: String,
    pub below: String,
    pub contains: String,
    pub reason: String,
}

impl EntryPoint {
    pub fn covers(&self, version: &str) -> bool {
        VersionRange::one(&self.min, &self.below).admits(version)
    }
}

impl Render {
    /// The folder trust the harness asks for, whichever the shape.
    pub fn folder_trust(&self) -> Option<&FolderTrust> {
        match self {
            Render::SettingsJson { folder_trust, .. }
            | Render::GeneratedFile { folder_trust, .. } => folder_trust.as_ref(),
        }
    }

    pub fn paths(&self) -> &Paths {
        match self {
            Render::SettingsJson { paths, .. } | Render::GeneratedFile { paths, .. } => paths,
        }
    }
}

/// Everything one adapter ships for projection.
#[derive(Clone, Debug)]
pub struct AdapterData {
    pub name: String,
    pub matrix: Matrix,
    /// `None` for a harness that is listed but cannot be projected (not admitted).
    pub render: Option<Render>,
    /// The template text of a generated-file renderer.
    pub template: Option<String>,
}

/// The projection data of every embedded adapter, by name.
#[derive(Clone, Debug, Default)]
pub struct Adapters {
    pub by_name: BTreeMap<String, AdapterData>,
}

impl Adapters {
    /// The data built into this binary. Invalid embedded data is a build defect; it is
    /// reported as an error naming the adapter and file rather than a panic.
    pub fn embedded() -> Result<Adapters, String> {
        Adapters::from_files(embedded::EMBEDDED.iter().copied())
    }

    /// Builds the table from `(adapter, file, text)` entries.
    pub fn from_files<'a>(
        files: impl Iterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> Result<Adapters, String> {
        let mut texts: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for (adapter, file, text) in files {
            texts
                .entry(adapter.to_string())
                .or_default()
                .insert(file.to_string(), text.to_string());
        }
        let mut by_name = BTreeMap::new();
        for (name, files) in texts {
            let Some(matrix_text) = files.get("matrix.json") else {
                continue;
            };
            let matrix: Matrix = serde_json::from_str(matrix_text)
                .map_err(|err| format!("adapters/{name}/matrix.json is invalid: {err}"))?;
            let render: Option<Render> = match files.get("render.json") {
                Some(text) => Some(
                    serde_json::from_str(text)
                        .map_err(|err| format!("adapters/{name}/render.json is invalid: {err}"))?,
                ),
                None => None,
            };
            let template = match &render {
                Some(Render::GeneratedFile { template, .. }) => {
                    Some(files.get(template).cloned().ok_or_else(|| {
                        format!("adapters/{name}/render.json names template {template:?}, which is not there")
                    })?)
                }
                _ => None,
            };
            by_name.insert(
                name.clone(),
                AdapterData {
                    name,
                    matrix,
                    render,
                    template,
                },
            );
        }
        Ok(Adapters { by_name })
    }

    /// The adapter names a canonical `targets` entry may use.
    pub fn names(&self) -> std::collections::BTreeSet<String> {
        self.by_name.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ranges_compare_numerically() {
        let range = VersionRange::one("0.9.0", "0.10.0");
        assert!(range.admits("0.9.12"));
        assert!(!range.admits("0.10.0"));
        assert!(!range.admits("0.8.99"));
        assert!(!range.admits("garbage"));
        assert!(range.admits("0.9.1-beta"));
    }

    #[test]
    fn an_admitted_list_admits_each_span_and_nothing_between() {
        let range: VersionRange = serde_json::from_str(
            r#"[{"min": "1.18.33", "below": "1.19.0", "verified_with": "1.18.33"},
                {"min": "2.2.5", "below": "2.3.0", "verified_with": "2.2.5"}]"#,
        )
        .unwrap_or_else(|err| panic!("{err}"));
        assert!(range.admits("1.18.33"));
        assert!(range.admits("2.2.5"));
        assert!(range.admits("2.2.9"));
        assert!(!range.admits("1.19.0"));
        assert!(!range.admits("2.0.0"));
        assert!(!range.admits("2.3.0"));
        assert_eq!(range.describe(), ">=1.18.33 <1.19.0 or >=2.2.5 <2.3.0");
        let one: VersionRange = serde_json::from_str(r#"{"min": "0.9.0", "below": "0.10.0"}"#)
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(one, VersionRange::one("0.9.0", "0.10.0"));
        let empty = serde_json::from_str::<VersionRange>("[]");
        assert!(empty.is_err(), "an empty admitted list is refused");
    }

    #[test]
    fn embedded_data_loads() {
        let adapters = Adapters::embedded().unwrap_or_else(|err| panic!("{err}"));
        assert!(!adapters.by_name.is_empty());
        for data in adapters.by_name.values() {
            assert_eq!(data.matrix.version, 1, "{}", data.name);
        }
    }
}
