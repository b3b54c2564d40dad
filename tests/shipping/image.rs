//! The multi-arch OCI image layout scripts/oci-image.sh writes (`make image`):
//! every blob is stored under its own digest, each platform's config names the
//! architecture its binary really is (the ELF e_machine read from the layer: the
//! defect of flant's arm64 image, which ships x86_64 binaries), the layer holds
//! exactly the static binary as root-owned 0755 with SOURCE_DATE_EPOCH as mtime,
//! and the config says what Dockerfile.scratch says. The same inputs give the same
//! bytes; another SOURCE_DATE_EPOCH gives another layer.

use crate::common::TempDir;
use crate::{elf_machine, machine_of, root, run, sha256, static_binary};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

const EPOCH: u64 = 1_700_000_000;

/// Writes the layout for both architectures into `dir/oci` with `epoch`.
fn write_layout(dir: &Path, epoch: u64) -> std::path::PathBuf {
    let out = dir.join("oci");
    run(Command::new(root().join("scripts/oci-image.sh"))
        .arg(&out)
        .args(["amd64", "arm64"])
        .env("SOURCE_DATE_EPOCH", epoch.to_string()));
    out
}

/// A blob's bytes, after checking its digest names them.
fn blob(layout: &Path, digest: &str) -> Vec<u8> {
    let hex = digest.strip_prefix("sha256:").expect("sha256 digest");
    let path = layout.join("blobs/sha256").join(hex);
    assert_eq!(
        sha256(&path),
        hex,
        "blob {digest} is not what its name says"
    );
    std::fs::read(path).expect("read blob")
}

fn json_blob(layout: &Path, descriptor: &Value) -> Value {
    let bytes = blob(layout, descriptor["digest"].as_str().expect("digest"));
    assert_eq!(
        Some(bytes.len() as u64),
        descriptor["size"].as_u64(),
        "{descriptor}"
    );
    serde_json::from_slice(&bytes).expect("json blob")
}

/// One ustar entry: (name, mode, uid, gid, mtime, content).
type Entry = (String, u32, u64, u64, u64, Vec<u8>);

/// The entries of an uncompressed ustar archive.
fn untar(bytes: &[u8]) -> Vec<Entry> {
    let octal = |field: &[u8]| {
        let text = String::from_utf8_lossy(field);
        u64::from_str_radix(text.trim_matches(|c: char| c == '\0' || c == ' '), 8)
            .expect("octal field")
    };
    let mut entries = Vec::new();
    let mut at = 0;
    while at + 512 <= bytes.len() && bytes[at] != 0 {
        let h = &bytes[at..at + 512];
        let name = String::from_utf8_lossy(&h[..100])
            .trim_end_matches('\0')
            .to_string();
        let size = octal(&h[124..136]) as usize;
        let content = bytes[at + 512..at + 512 + size].to_vec();
        entries.push((
            name,
            octal(&h[100..108]) as u32,
            octal(&h[108..116]),
            octal(&h[116..124]),
            octal(&h[136..148]),
            content,
        ));
        at += 512 + size.div_ceil(512) * 512;
    }
    entries
}

/// ENV, USER, EXPOSE, ENTRYPOINT and CMD of Dockerfile.scratch, in the OCI config's
/// form.
fn dockerfile_config() -> Value {
    let text = std::fs::read_to_string(root().join("Dockerfile.scratch")).expect("Dockerfile");
    let joined = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    let field = |word: &str| {
        joined
            .lines()
            .find_map(|l| l.strip_prefix(word))
            .unwrap_or_else(|| panic!("{word}in Dockerfile.scratch"))
            .trim()
            .to_string()
    };
    let env_line = field("ENV ");
    let env: Vec<&str> = env_line.split_whitespace().collect();
    let port = field("EXPOSE ");
    json!({
        "User": field("USER "),
        "ExposedPorts": {format!("{port}/tcp"): {}},
        "Env": env,
        "Entrypoint": serde_json::from_str::<Value>(&field("ENTRYPOINT ")).expect("json form"),
        "Cmd": serde_json::from_str::<Value>(&field("CMD ")).expect("json form"),
    })
}

#[test]
fn oci_layout_has_each_architecture_with_its_own_binary() {
    let bins = [
        ("amd64", static_binary("amd64")),
        ("arm64", static_binary("arm64")),
    ];
    let dir = TempDir::new("oci");
    let layout = write_layout(&dir.0, EPOCH);
    assert_eq!(
        std::fs::read_to_string(layout.join("oci-layout")).expect("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#
    );
    let top: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).expect("index.json"))
            .expect("index json");
    let tagged = &top["manifests"][0];
    assert_eq!(
        tagged["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    assert_eq!(
        tagged["annotations"]["org.opencontainers.image.ref.name"],
        env!("CARGO_PKG_VERSION")
    );
    let index = json_blob(&layout, tagged);
    let manifests = index["manifests"].as_array().expect("manifests");
    assert_eq!(manifests.len(), 2, "{index}");
    let expected_config = dockerfile_config();
    for ((arch, bin), entry) in bins.iter().zip(manifests) {
        assert_eq!(entry["platform"]["architecture"], *arch, "{entry}");
        assert_eq!(entry["platform"]["os"], "linux");
        let manifest = json_blob(&layout, entry);
        let config = json_blob(&layout, &manifest["config"]);
        assert_eq!(config["architecture"], *arch, "{config}");
        assert_eq!(config["os"], "linux");
        assert_eq!(
            config["config"], expected_config,
            "config vs Dockerfile.scratch"
        );
        let layer_desc = &manifest["layers"][0];
        assert_eq!(manifest["layers"].as_array().map(Vec::len), Some(1));
        let layer = blob(&layout, layer_desc["digest"].as_str().expect("digest"));
        assert_eq!(config["rootfs"]["diff_ids"][0], layer_desc["digest"]);
        let entries = untar(&layer);
        assert_eq!(entries.len(), 1, "one file in the layer");
        let (name, mode, uid, gid, mtime, content) = &entries[0];
        assert_eq!(name, "shell-operator");
        assert_eq!((*mode, *uid, *gid, *mtime), (0o755, 0, 0, EPOCH));
        assert_eq!(
            elf_machine(content),
            machine_of(arch),
            "{arch} image holds another architecture's binary"
        );
        assert!(
            *content == std::fs::read(bin).expect("binary"),
            "{arch} layer is not the built binary"
        );
    }
}

#[test]
fn oci_layout_is_deterministic_and_honours_source_date_epoch() {
    static_binary("amd64");
    static_binary("arm64");
    let (a, b, c) = (
        TempDir::new("oci-a"),
        TempDir::new("oci-b"),
        TempDir::new("oci-c"),
    );
    let archive = |dir: &Path| dir.join("oci.tar");
    write_layout(&a.0, EPOCH);
    write_layout(&b.0, EPOCH);
    write_layout(&c.0, EPOCH + 1);
    assert_eq!(sha256(&archive(&a.0)), sha256(&archive(&b.0)));
    assert_ne!(sha256(&archive(&a.0)), sha256(&archive(&c.0)));
    // The layout archive's own entries carry the epoch too.
    let entries = untar(&std::fs::read(archive(&c.0)).expect("archive"));
    assert!(entries.iter().all(|e| e.4 == EPOCH + 1 && e.2 == 0));
}
