//! Loaders for the openb trace CSVs. Columns are found by header name; extra columns are
//! ignored. A malformed row is an [`Error`] whose object is `file:line:column` and whose field is
//! the column's name: `decode pods.csv:3:2: column `cpu_milli`: expected a non-negative integer, got "12k"`.

use crate::error::{Error, Result};

/// One node of `openb_node_list_*.csv`: `sn,cpu_milli,memory_mib,gpu,model`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub gpu: u32,
    pub model: String,
}

/// One task of `openb_pod_list_*.csv`: `name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRow {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub num_gpu: u32,
    /// Per-GPU share as written (the replay clamps values above 1000 as the trace converter does).
    pub gpu_milli: i64,
    pub gpu_spec: String,
}

/// The bytes of trace file `file` as text; not UTF-8 is an error naming the line of the first bad byte.
pub fn utf8<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        Error::decode(format!("{file}:{line}"), "not UTF-8 text")
    })
}

struct Table<'a> {
    file: &'a str,
    header: Vec<&'a str>,
    rows: Vec<(usize, Vec<&'a str>)>,
}

fn split(line: &str) -> Vec<&str> {
    line.split(',').map(str::trim).collect()
}

/// The table of a trace CSV whose header must name `required` (the columns of a `what`).
fn table<'a>(file: &'a str, text: &'a str, what: &str, required: &[&str]) -> Result<Table<'a>> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim_end_matches('\r')));
    let Some((_, head)) = lines.by_ref().find(|(_, l)| !l.trim().is_empty()) else {
        return Err(Error::decode(file, "empty file (want a header line)"));
    };
    let header = split(head.trim_start_matches('\u{feff}'));
    if !required.iter().any(|c| header.contains(c)) {
        return Err(not_a_trace(file, head, what, required));
    }
    let mut rows = Vec::new();
    for (n, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        if let Some(at) = line.find('"') {
            let col = line[..at].matches(',').count();
            let field = header.get(col).map_or_else(|| format!("column {}", col + 1), |h| format!("column `{h}`"));
            return Err(
                Error::decode(position(file, n, col), "quoted fields are not supported in trace CSVs").field(field)
            );
        }
        rows.push((n, split(line)));
    }
    Ok(Table { file, header, rows })
}

/// A file whose first line names none of a trace's columns: most likely a manifest or the other list.
fn not_a_trace(file: &str, head: &str, what: &str, required: &[&str]) -> Error {
    let first: String = head.chars().take(40).collect();
    let manifest = ["{", "[", "#", "---", "apiVersion:", "kind:"].iter().any(|p| head.trim_start().starts_with(p));
    let hint =
        if manifest { "; a cluster snapshot (YAML or JSON) is for explain, serve and plan --snapshot" } else { "" };
    Error::decode(
        format!("{file}:1"),
        format!(
            "not a trace CSV: want {what} whose first line is the header {}, found {first:?}{hint}",
            required.join(",")
        ),
    )
}

/// `file:line:column` (1-based), the object of a row error: what editors and `grep -n` point at.
fn position(file: &str, line: usize, col: usize) -> String {
    format!("{file}:{line}:{}", col + 1)
}

fn column_field(name: &str) -> String {
    format!("column `{name}`")
}

impl<'a> Table<'a> {
    fn column(&self, name: &str, required: bool) -> Result<Option<usize>> {
        match self.header.iter().position(|h| *h == name) {
            Some(i) => Ok(Some(i)),
            None if required => Err(Error::decode(
                format!("{}:1", self.file),
                format!("missing from the header (header has: {})", self.header.join(",")),
            )
            .field(column_field(name))),
            None => Ok(None),
        }
    }

    fn text(&self, line: usize, fields: &[&'a str], col: usize, name: &str) -> Result<&'a str> {
        fields.get(col).copied().ok_or_else(|| {
            let message = format!("missing (row has {} fields, header has {})", fields.len(), self.header.len());
            Error::decode(position(self.file, line, col), message).field(column_field(name))
        })
    }

    fn int(&self, line: usize, fields: &[&'a str], col: usize, name: &str, max: i64) -> Result<i64> {
        let raw = self.text(line, fields, col, name)?;
        let at = || position(self.file, line, col);
        match raw.parse::<i64>() {
            Ok(v) if (0..=max).contains(&v) => Ok(v),
            Ok(v) => Err(Error::invalid(at(), format!("{v} is out of range 0..={max}")).field(column_field(name))),
            Err(_) => {
                Err(Error::decode(at(), format!("expected a non-negative integer, got {raw:?}"))
                    .field(column_field(name)))
            }
        }
    }

    fn name(&self, line: usize, fields: &[&'a str], col: usize, name: &str) -> Result<String> {
        let raw = self.text(line, fields, col, name)?;
        if raw.is_empty() {
            return Err(Error::invalid(position(self.file, line, col), "empty").field(column_field(name)));
        }
        Ok(raw.to_owned())
    }
}

const MAX_MILLI_CPU: i64 = 1 << 40;
const MAX_MIB: i64 = 1 << 40;

/// Parses a node list; `file` is only used in error messages.
pub fn parse_nodes(file: &str, text: &str) -> Result<Vec<NodeRow>> {
    let t = table(file, text, "an openb node list", &["sn", "cpu_milli", "memory_mib", "gpu", "model"])?;
    let (sn, cpu, mem, gpu) =
        (t.column("sn", true)?, t.column("cpu_milli", true)?, t.column("memory_mib", true)?, t.column("gpu", true)?);
    let (sn, cpu, mem, gpu) = (sn.unwrap_or(0), cpu.unwrap_or(0), mem.unwrap_or(0), gpu.unwrap_or(0));
    let model = t.column("model", false)?;
    let mut out = Vec::with_capacity(t.rows.len());
    for (line, f) in &t.rows {
        out.push(NodeRow {
            name: t.name(*line, f, sn, "sn")?,
            cpu_milli: t.int(*line, f, cpu, "cpu_milli", MAX_MILLI_CPU)?,
            memory_mib: t.int(*line, f, mem, "memory_mib", MAX_MIB)?,
            gpu: t.int(*line, f, gpu, "gpu", 1024)? as u32,
            model: match model {
                Some(c) => t.text(*line, f, c, "model")?.to_owned(),
                None => String::new(),
            },
        });
    }
    if out.is_empty() {
        return Err(Error::decode(file, "no node rows after the header"));
    }
    Ok(out)
}

/// Parses a pod (task) list; `file` is only used in error messages.
pub fn parse_pods(file: &str, text: &str) -> Result<Vec<PodRow>> {
    let cols = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"];
    let t = table(file, text, "an openb pod list", &cols)?;
    let mut idx = [0usize; 5];
    for (i, c) in cols.iter().enumerate() {
        idx[i] = t.column(c, true)?.unwrap_or(0);
    }
    let spec = t.column("gpu_spec", false)?;
    let mut out = Vec::with_capacity(t.rows.len());
    for (line, f) in &t.rows {
        out.push(PodRow {
            name: t.name(*line, f, idx[0], "name")?,
            cpu_milli: t.int(*line, f, idx[1], "cpu_milli", MAX_MILLI_CPU)?,
            memory_mib: t.int(*line, f, idx[2], "memory_mib", MAX_MIB)?,
            num_gpu: t.int(*line, f, idx[3], "num_gpu", 1024)? as u32,
            gpu_milli: t.int(*line, f, idx[4], "gpu_milli", 1_000_000)?,
            gpu_spec: match spec {
                Some(c) => f.get(c).copied().unwrap_or("").to_owned(),
                None => String::new(),
            },
        });
    }
    if out.is_empty() {
        return Err(Error::decode(file, "no pod rows after the header"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    const PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";

    fn parts(e: &Error) -> (ErrorKind, &str, &str, &str) {
        (e.kind, e.object.as_str(), e.field.as_str(), e.message.as_str())
    }

    #[test]
    fn parses_rows() {
        let nodes =
            parse_nodes("n.csv", "sn,cpu_milli,memory_mib,gpu,model\r\nn1,64000,262144,2,P100\r\n\r\n").unwrap();
        assert_eq!(
            nodes[0],
            NodeRow { name: "n1".into(), cpu_milli: 64000, memory_mib: 262144, gpu: 2, model: "P100".into() }
        );
        let pods = parse_pods("p.csv", &format!("{PODS}p1,1000,10,1,460\n")).unwrap();
        assert_eq!((pods[0].num_gpu, pods[0].gpu_milli, pods[0].gpu_spec.as_str()), (1, 460, ""));
    }

    #[test]
    fn a_bad_row_names_file_line_column_and_field() {
        let err = parse_pods("p.csv", &format!("{PODS}p1,1000,10,1,460\np2,1x,10,1,460\n")).unwrap_err();
        assert_eq!(
            parts(&err),
            (ErrorKind::Decode, "p.csv:3:2", "column `cpu_milli`", "expected a non-negative integer, got \"1x\"")
        );
        assert_eq!(
            err.to_string(),
            "decode p.csv:3:2: column `cpu_milli`: expected a non-negative integer, got \"1x\""
        );
        let err = parse_pods("p.csv", &format!("{PODS}p1,1000,10\n")).unwrap_err();
        assert_eq!(
            parts(&err),
            (ErrorKind::Decode, "p.csv:2:4", "column `num_gpu`", "missing (row has 3 fields, header has 5)")
        );
        let err = parse_pods("p.csv", &format!("{PODS}p1,1,1,-1,0\n")).unwrap_err();
        assert_eq!(parts(&err), (ErrorKind::Invalid, "p.csv:2:4", "column `num_gpu`", "-1 is out of range 0..=1024"));
        let err = parse_pods("p.csv", &format!("{PODS},1,1,1,0\n")).unwrap_err();
        assert_eq!(parts(&err), (ErrorKind::Invalid, "p.csv:2:1", "column `name`", "empty"));
        let err = parse_nodes("n.csv", "sn,cpu_milli,memory_mib,gpu\n\"n1\",1,1,1\n").unwrap_err();
        assert_eq!(
            parts(&err),
            (ErrorKind::Decode, "n.csv:2:1", "column `sn`", "quoted fields are not supported in trace CSVs")
        );
    }

    #[test]
    fn a_manifest_is_not_a_trace_csv() {
        let err = parse_nodes("s.yaml", "# A small cluster, as `kubectl get nodes`\napiVersion: v1\n").unwrap_err();
        assert_eq!(err.object, "s.yaml:1");
        assert!(err.message.starts_with("not a trace CSV: want an openb node list whose first line is the header sn,cpu_milli,memory_mib,gpu,model, found \"# A small"), "{err}");
        assert!(err.message.ends_with("a cluster snapshot (YAML or JSON) is for explain, serve and plan --snapshot"));
        let err = parse_pods("p.json", "{\"kind\": \"List\"}\n").unwrap_err();
        assert!(err.message.contains("openb pod list whose first line is the header name,cpu_milli"), "{err}");
    }

    #[test]
    fn a_bad_file_names_the_file() {
        let err = parse_nodes("n.csv", "sn,cpu,memory_mib,gpu\n").unwrap_err();
        assert_eq!(
            parts(&err),
            (
                ErrorKind::Decode,
                "n.csv:1",
                "column `cpu_milli`",
                "missing from the header (header has: sn,cpu,memory_mib,gpu)"
            )
        );
        assert_eq!(
            parts(&parse_nodes("n.csv", "").unwrap_err()),
            (ErrorKind::Decode, "n.csv", "", "empty file (want a header line)")
        );
        assert_eq!(parse_nodes("n.csv", " \n\r\n").unwrap_err().message, "empty file (want a header line)");
        assert_eq!(parse_pods("p.csv", PODS).unwrap_err().to_string(), "decode p.csv: no pod rows after the header");
        assert_eq!(utf8("p.csv", b"a\nb\n\xffc").unwrap_err().to_string(), "decode p.csv:3: not UTF-8 text");
        assert_eq!(utf8("p.csv", b"a,b\n").unwrap(), "a,b\n");
    }
}
