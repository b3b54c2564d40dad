//! The upgrade decision's checksum: values, chart files, and `global` left out only
//! for a chart whose templates cannot read it.

use super::*;
use serde_json::json;

/// The checksum of a values text with `chart`, every value counted.
fn checksum(values_text: &str, chart: &Path) -> Result<String, ChartError> {
    Ok(hash(values_text, &read_chart(chart)?))
}

struct Chart(PathBuf);

impl Chart {
    fn new(name: &str, template: &str) -> Chart {
        let dir = std::env::temp_dir().join(format!("chart-sum-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("templates")).unwrap();
        std::fs::write(dir.join("Chart.yaml"), "name: c\n").unwrap();
        std::fs::write(dir.join("templates/cm.yaml"), template).unwrap();
        Chart(dir)
    }
}

impl Drop for Chart {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn checksum_follows_values_and_chart_files() {
    let chart = Chart::new("files", "kind: ConfigMap\n");
    let dir = &chart.0;
    let a = checksum("m", dir).unwrap();
    assert_eq!(a.len(), 32);
    assert_eq!(a, checksum("m", dir).unwrap());
    assert_ne!(a, checksum("m2", dir).unwrap());
    std::fs::write(dir.join("templates/cm.yaml"), "kind: ConfigMap # x\n").unwrap();
    let b = checksum("m", dir).unwrap();
    assert_ne!(a, b);
    std::fs::write(dir.join("templates/new.txt"), "").unwrap();
    assert_ne!(b, checksum("m", dir).unwrap());
    let e = checksum("m", &dir.join("missing")).unwrap_err().to_string();
    assert!(e.contains("missing"), "{e}");
}

#[test]
fn global_counts_only_for_a_chart_that_may_read_it() {
    let before = json!({"global": {"a": 1}, "m": {"x": 1}});
    let global_moved = json!({"global": {"a": 2}, "m": {"x": 1}});
    let own_moved = json!({"global": {"a": 1}, "m": {"x": 2}});

    let blind = Chart::new("blind", "x: {{ .Values.m.x }}\n");
    let sum = |v| decision_checksum(v, &blind.0).unwrap();
    assert_eq!(sum(&before), sum(&global_moved));
    assert_ne!(sum(&before), sum(&own_moved));

    let reads = Chart::new("reads", "x: {{ .Values.global.a }}\n");
    let sum = |v| decision_checksum(v, &reads.0).unwrap();
    assert_ne!(sum(&before), sum(&global_moved));
    assert_ne!(sum(&before), sum(&own_moved));
    // What it hashes then is the values helm gets, as the file's text.
    assert_eq!(
        sum(&before),
        checksum(&before.to_string(), &reads.0).unwrap()
    );
}
