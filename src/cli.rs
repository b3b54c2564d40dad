//! The command line: which program we are (by argv[0] or subcommand), which command
//! was asked for, and the flags of `start`. Argument handling only: the work is done
//! by `operator::run` once a typed `Config` exists.
//!
//! Commands: `start` (also the bare command, flags included), `version`, `help` and
//! `debug-options`; `--help` works on every level. The debug client commands
//! (`queue`, `hook`, `config`, `raw`) go to `debug::client`, and `jq` (or running
//! the binary as `jq`) to `jq_cli`.

use crate::flags::{FlagError, FlagSpec, Kind, Program, Values};

/// Version printed by `version` and at start.
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What the command line asked for.
#[derive(Debug)]
pub(crate) enum Command {
    Start(Box<crate::flags::Config>),
    /// `version`; `--verbose` (`-v`) adds the build facts (see `build.rs`).
    Version {
        verbose: bool,
    },
    Help(String),
    DebugOptions,
    /// A debug socket client command; the words after the program name.
    Debug(Vec<String>),
    /// The built-in jq; its arguments.
    Jq(Vec<String>),
}

/// Entry point used by `main.rs`: parses argv and the environment, runs the command,
/// returns the process exit code.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().collect();
    let env = |name: &str| std::env::var(name).ok();
    // Multi-call: invoked as `jq` (a symlink or copy), behave as jq.
    let program = args.first().map(std::path::Path::new);
    if program
        .and_then(|p| p.file_name())
        .is_some_and(|n| n == "jq")
    {
        return crate::jq_cli::main(args.get(1..).unwrap_or_default());
    }
    let (program, skip) = program_of(&args);
    let name = program.name();
    // helm's post-renderer: `post-renderer` (argv[0] or the first word).
    let invoked = |w: &str| program_of_word(&args, w);
    if invoked("post-renderer") || args.get(skip).is_some_and(|a| a == "post-renderer") {
        return crate::addon::release::post_render::main();
    }
    match parse(&args, &env) {
        Ok(Command::Debug(words)) => {
            // addon-operator's socket has its own default path.
            let env = |name: &str| {
                env(name).or_else(|| {
                    (program == Program::Addon && name == "DEBUG_UNIX_SOCKET")
                        .then(|| crate::debug::client::ADDON_DEFAULT_SOCKET.to_string())
                })
            };
            crate::debug::client::main(&words, &env, program == Program::Addon)
        }
        Ok(Command::Jq(jq_args)) => crate::jq_cli::main(&jq_args),
        Ok(Command::Start(config)) => {
            // The banner is a log line like any other: with LOG_TYPE=json a plain
            // line broke `kubectl logs | jq` (issue 37). Text logs keep it plain.
            if config.log.log_type == "json" {
                crate::log::init(&config.log);
                crate::log::info(&format!("{name} v{VERSION}"), &[]);
            } else {
                println!("{name} v{VERSION}");
            }
            if program == Program::Addon
                && let Err(e) = crate::flags::addon::check_no_helm2(&env)
            {
                eprintln!("Error: {e}");
                return 1;
            }
            let code = crate::operator::run(*config);
            // A queue that met a failure no retry can fix stopped the operator.
            match crate::queue::outcome::stopped_by() {
                Some(_) => 1,
                None => code,
            }
        }
        Ok(Command::Version { verbose }) => {
            println!("{name} v{VERSION}");
            println!("jqFilter implementation: using jaq (jaq-core 3)");
            if verbose {
                print!("{}", build_facts());
            }
            0
        }
        Ok(Command::Help(text)) => {
            print!("{text}");
            0
        }
        Ok(Command::DebugOptions) => {
            print!("{}", debug_options_for(program));
            0
        }
        Err(e) => {
            eprintln!("Error: {e}");
            eprintln!("Run '{name} --help' for usage.");
            1
        }
    }
}

/// Whether the binary was invoked under the name `word` (a symlink or copy).
fn program_of_word(args: &[String], word: &str) -> bool {
    args.first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|n| n == word)
}

/// Which operator argv asks for, and where its own words start: the binary invoked
/// as `addon-operator` (a symlink), or `shell-operator addon-operator ...`.
pub(crate) fn program_of(args: &[String]) -> (Program, usize) {
    let invoked_as = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|n| n.to_str());
    if invoked_as == Some("addon-operator") {
        return (Program::Addon, 1);
    }
    if args.get(1).is_some_and(|a| a == "addon-operator") {
        return (Program::Addon, 2);
    }
    (Program::Shell, 1)
}

/// Parses argv (with argv[0]) and the environment into a command.
pub(crate) fn parse(
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Command, FlagError> {
    let (program, skip) = program_of(args);
    let rest = args.get(skip..).unwrap_or_default();
    let (command, rest) = match rest.first().map(String::as_str) {
        Some("start") => ("start", &rest[1..]),
        Some("version") => ("version", &rest[1..]),
        Some("help") => {
            let topic = rest.get(1).map(String::as_str);
            return Ok(Command::Help(help_for(program, topic)));
        }
        Some("debug-options") => return Ok(Command::DebugOptions),
        Some("queue" | "hook" | "config" | "raw") => return Ok(Command::Debug(rest.to_vec())),
        Some("global" | "module") if program == Program::Addon => {
            return Ok(Command::Debug(rest.to_vec()));
        }
        Some("jq") => return Ok(Command::Jq(rest[1..].to_vec())),
        Some("-h" | "--help") => return Ok(Command::Help(root_help(program))),
        Some(arg) if !arg.starts_with('-') => {
            return Err(FlagError(format!(
                "unknown command {arg:?}: expected start, version, help, queue, hook, config, raw or jq"
            )));
        }
        _ => ("start", rest),
    };
    if rest.iter().any(|a| a == "--help" || a == "-h") {
        return Ok(Command::Help(help_for(program, Some(command))));
    }
    match command {
        "version" => match rest.first().map(String::as_str) {
            None => Ok(Command::Version { verbose: false }),
            Some("--verbose" | "-v") if rest.len() == 1 => Ok(Command::Version { verbose: true }),
            Some(_) => Err(FlagError(format!(
                "version takes only --verbose, got {:?}",
                rest.join(" ")
            ))),
        },
        _ => {
            let flag_values = parse_flags(program, rest)?;
            let values = Values::resolve(program, env, &flag_values)?;
            Ok(Command::Start(Box::new(values.into_config_for(program))))
        }
    }
}

/// Splits `--name value`, `--name=value` and bare boolean `--name` into pairs.
fn parse_flags(
    program: Program,
    args: &[String],
) -> Result<Vec<(&'static FlagSpec, String)>, FlagError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let Some(body) = arg.strip_prefix("--") else {
            return Err(FlagError(format!(
                "unexpected argument {arg:?}: start takes only flags"
            )));
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        let spec = program
            .spec(name)
            .ok_or_else(|| FlagError(format!("unknown flag: --{name}")))?;
        let value = match (inline, spec.kind) {
            (Some(v), _) => v,
            (None, Kind::Bool) => "true".to_string(),
            (None, _) => {
                i += 1;
                args.get(i)
                    .cloned()
                    .ok_or_else(|| FlagError(format!("flag needs an argument: --{name}")))?
            }
        };
        out.push((spec, value));
        i += 1;
    }
    Ok(out)
}

fn root_help(program: Program) -> String {
    if program == Program::Addon {
        return ADDON_HELP.to_string();
    }
    "shell-operator runs executables (hooks) on startup, on schedules, on Kubernetes \
events and as admission or conversion webhooks.\n\n\
Usage:\n  shell-operator [command] [flags]\n\n\
Commands:\n  start      Run the operator (the default command; its flags work without it too)\n  \
version    Print the version\n  help       Help about a command\n  \
queue      Queues of a running operator: queue list, queue main\n  \
hook       Hooks of a running operator: hook list, hook snapshot <hook>\n  \
config     Runtime parameters: config list, config set log.level debug [duration]\n  \
raw        GET any debug socket path\n  \
jq         Built-in jq (also when the binary is invoked as jq)\n  \
addon-operator  Run as addon-operator (also when the binary is invoked as addon-operator)\n\n\
Run 'shell-operator start --help' for the flags.\n"
        .to_string()
}

const ADDON_HELP: &str = "addon-operator installs and runs modules (a Helm chart, hooks and \
values) and global hooks, configured by a ConfigMap.\n\n\
Usage:\n  addon-operator [command] [flags]\n\n\
Commands:\n  start      Run the operator (the default command; its flags work without it too)\n  \
version    Print the version\n  help       Help about a command\n  \
queue      Queues of a running operator: queue list, queue main\n  \
hook       Hooks of a running operator: hook list, hook snapshot <hook>\n  \
config     Runtime parameters: config list, config set log.level debug [duration]\n  \
raw        GET any debug socket path\n  \
global     Global hooks and values: global list|values|config|patches|snapshots\n  \
module     Modules: module list, module values|config|patches|snapshots|render <module>, \
module resource-monitor [<module>], module drift [<module>], \
module settings export resources|configmap\n\n\
Run 'addon-operator start --help' for the flags, 'addon-operator module --help' for the \
debug commands.\n";

/// The facts `build.rs` embeds, one `key: value` line each.
fn build_facts() -> String {
    format!(
        "target: {}\ncommit: {}\nrustc: {}\ncrates: {}\n",
        env!("SO_BUILD_TARGET"),
        env!("SO_BUILD_COMMIT"),
        env!("SO_BUILD_RUSTC"),
        env!("SO_BUILD_CRATES"),
    )
}

fn help_for(program: Program, command: Option<&str>) -> String {
    let name = program.name();
    match command {
        Some("start") => start_help(program, false),
        Some("version") => format!(
            "Print the version; --verbose adds the target, git commit, rustc and crate count.\n\n\
             Usage:\n  {name} version [--verbose]\n"
        ),
        _ => root_help(program),
    }
}

/// Help of `start`: every flag with its env var and default.
fn start_help(program: Program, hidden: bool) -> String {
    let name = program.name();
    let mut out = format!(
        "Run the operator.\n\nUsage:\n  {name} start [flags]\n\nFlags (flag > env > default):\n",
    );
    for f in program.flags().into_iter().filter(|f| f.hidden == hidden) {
        let value = match f.kind {
            Kind::Bool => String::new(),
            Kind::Choice(c) => format!(" <{}>", c.join("|")),
            _ => " <value>".to_string(),
        };
        let env: Vec<&str> = std::iter::once(f.env)
            .chain(f.aliases.iter().copied())
            .collect();
        out.push_str(&format!(
            "  --{}{}\n      {} [env {}, default {:?}]\n",
            f.name,
            value,
            f.help,
            env.join(" or "),
            f.default
        ));
    }
    if !hidden {
        out.push_str(&format!("\nHidden debug flags: {name} debug-options\n"));
    }
    out
}

fn debug_options_for(program: Program) -> String {
    start_help(program, true).replacen("Flags (flag > env > default)", "Debug flags", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Command, FlagError> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse(&args, &|_| None)
    }

    #[test]
    fn bare_command_accepts_start_flags() {
        match run(&["shell-operator", "--hooks-dir", "/x", "--log-no-time"]) {
            Ok(Command::Start(c)) => {
                assert_eq!(c.hooks_dir, std::path::PathBuf::from("/x"));
                assert!(c.log.no_time);
            }
            other => panic!("expected start, got {other:?}"),
        }
    }

    #[test]
    fn start_with_equals_and_bool_values() {
        match run(&[
            "shell-operator",
            "start",
            "--listen-port=9000",
            "--log-no-time=false",
        ]) {
            Ok(Command::Start(c)) => assert_eq!((c.listen_port, c.log.no_time), (9000, false)),
            other => panic!("expected start, got {other:?}"),
        }
    }

    #[test]
    fn errors_name_the_flag() {
        assert_eq!(
            run(&["so", "--nope"]).unwrap_err().0,
            "unknown flag: --nope"
        );
        assert_eq!(
            run(&["so", "start", "--hooks-dir"]).unwrap_err().0,
            "flag needs an argument: --hooks-dir"
        );
        assert!(
            run(&["so", "frobnicate"])
                .unwrap_err()
                .0
                .contains("unknown command")
        );
    }

    #[test]
    fn addon_operator_by_argv0_or_subcommand() {
        for args in [
            &["/bin/addon-operator", "--config-map", "cm"][..],
            &[
                "shell-operator",
                "addon-operator",
                "start",
                "--config-map=cm",
            ],
        ] {
            match run(args) {
                Ok(Command::Start(c)) => {
                    assert_eq!(c.program, Program::Addon);
                    assert_eq!(c.addon.as_ref().map(|a| a.config_map.as_str()), Some("cm"));
                    assert_eq!(c.listen_port, 9650);
                }
                other => panic!("{args:?}: expected addon start, got {other:?}"),
            }
        }
        let Ok(Command::Help(text)) = run(&["addon-operator", "start", "--help"]) else {
            panic!("help")
        };
        assert!(text.contains("--modules-dir") && text.contains("MODULES_DIR"));
        assert!(!text.contains("--hooks-dir"), "shell-only flag listed");
        assert!(matches!(
            run(&["addon-operator", "version"]),
            Ok(Command::Version { verbose: false })
        ));
        let err = run(&["addon-operator", "--hooks-dir", "x"]).unwrap_err();
        assert_eq!(err.0, "unknown flag: --hooks-dir");
        let err = run(&["addon-operator", "--prometheus-listen-port", "99999"]).unwrap_err();
        assert!(err.0.contains("--prometheus-listen-port"), "{}", err.0);
    }

    #[test]
    fn help_on_every_level() {
        for args in [
            &["so", "--help"][..],
            &["so", "start", "--help"],
            &["so", "version", "-h"],
            &["so", "help", "start"],
        ] {
            assert!(matches!(run(args), Ok(Command::Help(_))), "{args:?}");
        }
        let Ok(Command::Help(text)) = run(&["so", "start", "--help"]) else {
            panic!("help")
        };
        assert!(
            text.contains("--listen-port <value>") && text.contains("SHELL_OPERATOR_LISTEN_PORT")
        );
        assert!(
            !text.contains("--debug-keep-tmp-files"),
            "hidden flags stay hidden"
        );
        assert!(debug_options_for(Program::Shell).contains("--debug-keep-tmp-files"));
    }
}
