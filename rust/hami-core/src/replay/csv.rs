//! Loaders for the openb trace CSVs. Columns are found by header name; extra columns are
//! ignored. A malformed row is an error naming the file, the line and the column.

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

struct Table<'a> {
    file: &'a str,
    header: Vec<&'a str>,
    rows: Vec<(usize, Vec<&'a str>)>,
}

fn split(line: &str) -> Vec<&str> {
    line.split(',').map(str::trim).collect()
}

fn table<'a>(file: &'a str, text: &'a str) -> Result<Table<'a>, String> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim_end_matches('\r')));
    let Some((_, head)) = lines.by_ref().find(|(_, l)| !l.trim().is_empty()) else {
        return Err(format!("{file}: empty file (want a header line)"));
    };
    let header = split(head.trim_start_matches('\u{feff}'));
    let mut rows = Vec::new();
    for (n, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        if let Some(col) = line.find('"') {
            let column = line[..col].matches(',').count() + 1;
            return Err(format!("{file}:{n}:{column}: quoted fields are not supported in trace CSVs"));
        }
        rows.push((n, split(line)));
    }
    Ok(Table { file, header, rows })
}

impl<'a> Table<'a> {
    fn column(&self, name: &str, required: bool) -> Result<Option<usize>, String> {
        match self.header.iter().position(|h| *h == name) {
            Some(i) => Ok(Some(i)),
            None if required => {
                Err(format!("{}:1: missing column `{name}` (header has: {})", self.file, self.header.join(",")))
            }
            None => Ok(None),
        }
    }

    fn text(&self, line: usize, fields: &[&'a str], col: usize, name: &str) -> Result<&'a str, String> {
        fields.get(col).copied().ok_or_else(|| {
            format!(
                "{}:{line}:{}: column `{name}` is missing (row has {} fields, header has {})",
                self.file,
                col + 1,
                fields.len(),
                self.header.len()
            )
        })
    }

    fn int(&self, line: usize, fields: &[&'a str], col: usize, name: &str, max: i64) -> Result<i64, String> {
        let raw = self.text(line, fields, col, name)?;
        match raw.parse::<i64>() {
            Ok(v) if (0..=max).contains(&v) => Ok(v),
            Ok(v) => Err(format!("{}:{line}:{}: column `{name}`: {v} is out of range 0..={max}", self.file, col + 1)),
            Err(_) => Err(format!(
                "{}:{line}:{}: column `{name}`: expected a non-negative integer, got {raw:?}",
                self.file,
                col + 1
            )),
        }
    }

    fn name(&self, line: usize, fields: &[&'a str], col: usize, name: &str) -> Result<String, String> {
        let raw = self.text(line, fields, col, name)?;
        if raw.is_empty() {
            return Err(format!("{}:{line}:{}: column `{name}` is empty", self.file, col + 1));
        }
        Ok(raw.to_owned())
    }
}

const MAX_MILLI_CPU: i64 = 1 << 40;
const MAX_MIB: i64 = 1 << 40;

/// Parses a node list; `file` is only used in error messages.
pub fn parse_nodes(file: &str, text: &str) -> Result<Vec<NodeRow>, String> {
    let t = table(file, text)?;
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
        return Err(format!("{file}: no node rows"));
    }
    Ok(out)
}

/// Parses a pod (task) list; `file` is only used in error messages.
pub fn parse_pods(file: &str, text: &str) -> Result<Vec<PodRow>, String> {
    let t = table(file, text)?;
    let cols = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"];
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
        return Err(format!("{file}: no pod rows"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_reports_position() {
        let nodes =
            parse_nodes("n.csv", "sn,cpu_milli,memory_mib,gpu,model\r\nn1,64000,262144,2,P100\r\n\r\n").unwrap();
        assert_eq!(
            nodes[0],
            NodeRow { name: "n1".into(), cpu_milli: 64000, memory_mib: 262144, gpu: 2, model: "P100".into() }
        );
        let pods = parse_pods("p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,10,1,460\n").unwrap();
        assert_eq!((pods[0].num_gpu, pods[0].gpu_milli, pods[0].gpu_spec.as_str()), (1, 460, ""));
        let err =
            parse_pods("p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,10,1,460\np2,1x,10,1,460\n")
                .unwrap_err();
        assert_eq!(err, "p.csv:3:2: column `cpu_milli`: expected a non-negative integer, got \"1x\"");
        let err = parse_pods("p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,10\n").unwrap_err();
        assert!(err.starts_with("p.csv:2:4: column `num_gpu` is missing"), "{err}");
        let err = parse_nodes("n.csv", "sn,cpu,memory_mib,gpu\n").unwrap_err();
        assert!(err.starts_with("n.csv:1: missing column `cpu_milli`"), "{err}");
        let err = parse_pods("p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1,1,-1,0\n").unwrap_err();
        assert!(err.starts_with("p.csv:2:4:"), "{err}");
        assert!(parse_nodes("n.csv", "").unwrap_err().contains("empty"));
    }
}
