//! The template reader on the idioms real charts use: each case says whether the
//! template cannot read `global` (`Ok`) or may (`Err`, with the reason checked).

use super::*;

fn ignores(text: &str) {
    if let Err(why) = template_ignores_global(text) {
        panic!("should ignore global, said {why:?}:\n{text}");
    }
}

fn may_read(text: &str, reason: &str) {
    match template_ignores_global(text) {
        Ok(()) => panic!("should be taken as reading global:\n{text}"),
        Err(why) => assert!(
            why.to_string().contains(reason),
            "{why:?} should name {reason:?}:\n{text}"
        ),
    }
}

#[test]
fn common_chart_idioms_do_not_read_global() {
    ignores("kind: ConfigMap\ndata:\n  a: b\n");
    ignores("msg: {{ .Values.myModule.message | quote }}");
    ignores(
        "{{- with .Values.myModule.resources }}\nresources:\n{{ toYaml . | nindent 2 }}\n{{- end }}",
    );
    ignores(
        "{{- define \"m.labels\" -}}\napp: {{ .Chart.Name }}\nrelease: {{ .Release.Name }}\n{{- end }}\n\
         labels:\n  {{- include \"m.labels\" . | nindent 4 }}",
    );
    ignores("{{- range $i, $p := .Values.myModule.ports }}\n- {{ $i }}: {{ $p.port }}\n{{- end }}");
    ignores("{{ $name := .Values.myModule.name | default .Release.Name }}name: {{ $name }}");
    ignores("{{/* .Values.global is read nowhere: {{ toYaml . }} */}}x: 1");
    ignores("{{- /* trimmed comment */ -}}");
    ignores(
        "{{ if and .Values.myModule.a (eq .Values.myModule.b \"x\") }}y{{ else if .Values.myModule.c }}\
         z{{ else }}w{{ end }}",
    );
    ignores(
        "{{ .Files.Get \"conf/a.ini\" | b64enc }} {{ .Capabilities.APIVersions.Has \"apps/v1\" }}",
    );
    ignores("{{ with .Values.myModule }}{{ $.Values.myModule.x }}{{ .y }}{{ end }}");
    ignores("{{ printf \"%s-%s\" .Release.Name \"x\" | trunc 63 | trimSuffix \"-\" }}");
    ignores("{{ \"}} {{ .Values.global\" }} {{ `raw\n}}` }} {{ 'x' }}");
    ignores("{{ -1 }} {{- 3 -}} {{ 1.5e-3 }} {{ add 1 -2 }} {{ .5 }} {{ 0x1F }}");
    ignores("{{ $ctx := . }}{{ $ctx.Release.Name }} {{ template \"t\" $ctx }}");
    ignores("{{ template \"t\" . }}{{ block \"b\" . }}{{ .Chart.Version }}{{ end }}");
    ignores("{{ (.Values.myModule.x).y }} {{ (index .Values.myModule.list 0).name }}");
    ignores("{{ .Values._addonOperatorModuleChecksum }} {{ .Values.myModule.global }}");
    ignores("{{ range .Values.myModule.l }}{{ . }}{{ else }}{{ .Release.Name }}{{ end }}");
    ignores(
        "{{ with $x := .Values.myModule.a }}{{ $x }}{{ end }}{{ lookup \"v1\" \"Secret\" \"ns\" \"n\" }}",
    );
    ignores("{{ include (print \"a\" \"b\") . }} {{ . | include \"x\" }}");
}

#[test]
fn reading_global_or_handing_over_everything_is_seen() {
    may_read("{{ .Values.global.discovery.x }}", "`.Values.global`");
    may_read(
        "{{ with .Values.myModule }}{{ $.Values.global.x }}{{ end }}",
        "`.Values.global`",
    );
    may_read("{{ toYaml .Values }}", "passed to `toYaml`");
    may_read("{{ .Values | toYaml }}", "passed to `toYaml`");
    may_read("{{ toYaml . }}", "passed to `toYaml`");
    may_read(
        "{{ with .Values.myModule }}{{ toJson $ }}{{ end }}",
        "passed to `toJson`",
    );
    may_read(
        "{{ range $k, $v := .Values }}{{ $k }}{{ end }}",
        "a `range` value",
    );
    may_read("{{ with .Values }}{{ .global }}{{ end }}", "a `with` value");
    may_read("{{ $v := .Values }}{{ $v.global.x }}", "`.Values.global`");
    may_read("{{ $v := .Values }}{{ toYaml $v }}", "passed to `toYaml`");
    may_read("{{ index .Values \"global\" \"x\" }}", "passed to `index`");
    may_read("{{ get $.Values \"global\" }}", "passed to `get`");
    may_read("{{ .Values.YAML }}", "`.Values.YAML`");
    may_read("{{ $.AsMap }}", "`.AsMap` of the root");
    may_read("{{ .Subcharts.db.Values.x }}", "`.Subcharts` of the root");
    may_read("{{ tpl .Values.myModule.text . }}", "`tpl`");
    may_read("{{ call .Values.myModule.f }}", "`call`");
    may_read("{{ include \"x\" .Values }}", "handed to a template");
    may_read("{{ template \"x\" .Values }}", "handed to a template");
    may_read("{{ include \"x\" (dict \"ctx\" $) }}", "passed to `dict`");
    may_read(
        "{{ define \"x\" }}{{ toYaml . }}{{ end }}",
        "passed to `toYaml`",
    );
    may_read("{{ printf \"%v\" . }}", "passed to `printf`");
    may_read("{{ . }}", "a printed value");
    may_read("{{ if . }}x{{ end }}", "an `if` condition");
    may_read(
        "{{ .Values.myModule.x | default (index $ \"Values\") }}",
        "passed to `index`",
    );
}

#[test]
fn a_loop_that_assigns_the_root_later_is_seen() {
    // The first iteration prints "a"; the second prints the root. Read in text order
    // once, `$x` is still safe where it is printed.
    may_read(
        "{{ $x := \"a\" }}{{ range .Values.myModule.l }}{{ toYaml $x }}{{ $x = $ }}{{ end }}",
        "passed to `toYaml`",
    );
    may_read(
        "{{ $x := \"a\" }}{{ range .Values.myModule.l }}{{ $x.global }}{{ $x = $.Values }}{{ end }}",
        "`.Values.global`",
    );
}

/// A long chain of assignments (each round moves the root one variable along) is
/// not read to its end: the reading is bounded, and the answer is "may read".
#[test]
fn a_chain_longer_than_the_rounds_counts_as_reading() {
    let n = 5_000;
    let mut text = String::new();
    for i in 0..=n {
        text.push_str(&format!("{{{{ $v{i} := \"x\" }}}}"));
    }
    // `$v0 = $v1`, …, `$v{n} = $`: each round of reading moves the root one step back.
    for i in 0..n {
        text.push_str(&format!("{{{{ $v{i} = $v{} }}}}", i + 1));
    }
    text.push_str(&format!("{{{{ $v{n} = $ }}}}{{{{ toYaml $v0 }}}}"));
    let started = std::time::Instant::now();
    let why = template_ignores_global(&text).unwrap_err();
    assert!(why.to_string().contains("did not settle"), "{why}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn what_this_reader_does_not_understand_counts_as_reading() {
    may_read("{{ .Values.a & .Values.b }}", "unexpected");
    may_read("{{ .Values.a ", "unclosed action");
    may_read("{{ \"abc }}", "unclosed string");
    may_read("{{ end }}", "without a block");
    may_read("{{ else }}", "without a block");
    may_read("{{ /* open", "unclosed comment");
    may_read("{{ (.Values.a }}", "unclosed `(`");
    // Not a number (Go refuses it too): never a literal that hides `.Values.global`.
    may_read("{{-.Values.global.x}}", "unexpected");
    may_read("{{ 1.Values.global.x }}", "`.Values.global`");
    // Each level is a recursion of the reader: a deep nest is refused, not followed.
    let deep = format!(
        "{{{{ {}.Values.m.a{} }}}}",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    may_read(&deep, "nested too deep");
    let fine = format!("{{{{ {}.Values.m.a{} }}}}", "(".repeat(60), ")".repeat(60));
    ignores(&fine);
}

#[test]
fn chart_level_rules() {
    let blind = b"{{ .Values.m.a }}".as_slice();
    let ok = |files: &[(&str, &[u8])]| {
        let files: Vec<(&Path, &[u8])> = files.iter().map(|(p, d)| (Path::new(*p), *d)).collect();
        chart_ignores_global(&files)
    };
    assert_eq!(
        ok(&[
            ("Chart.yaml", b"name: m\nversion: 0.1.0\n"),
            ("values.yaml", b"global: {a: 1}\n"),
            ("hooks/x.sh", b"{{ .Values.global }}"),
            ("templates/a.yaml", blind),
        ]),
        Ok(())
    );
    let err = ok(&[
        ("templates/a.yaml", blind),
        ("templates/b.yaml", b"{{ .Values.global.x }}"),
    ]);
    assert!(
        err.unwrap_err()
            .to_string()
            .starts_with("templates/b.yaml: ")
    );
    assert!(
        ok(&[("charts/db/Chart.yaml", b"name: db")])
            .unwrap_err()
            .to_string()
            .contains("subcharts")
    );
    assert!(
        ok(&[("values.schema.json", b"{}")])
            .unwrap_err()
            .to_string()
            .contains("schema")
    );
    assert!(ok(&[("Chart.yaml", b"name: m\ndependencies:\n- name: db\n")]).is_err());
    assert!(ok(&[("requirements.yaml", b"dependencies: []")]).is_err());
    assert!(
        ok(&[("templates/bin", &[0xff, 0xfe])])
            .unwrap_err()
            .to_string()
            .contains("UTF-8")
    );
}

/// Whatever bytes a template holds, the reader answers and does not panic.
#[test]
fn never_panics_on_arbitrary_text() {
    let alphabet: Vec<&str> = vec![
        "{{", "}}", "-", " ", "\n", ".", "$", "(", ")", "|", ",", ":=", "=", "\"", "'", "`", "\\",
        "/*", "*/", "Values", "global", "x", "1", "e", "+", "if", "end", "else", "with", "range",
        "define", "é", "{", "}",
    ];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..20_000 {
        let mut text = String::new();
        for _ in 0..(seed % 24) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            text.push_str(alphabet[(seed % alphabet.len() as u64) as usize]);
        }
        let _ = template_ignores_global(&text);
    }
}
