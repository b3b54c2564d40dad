//! Module directory names → module name, order and values key (spec §2.1, HEAD rules).
//!
//! A module directory is `[<digits>-]<name>`; the digits are the order (31-bit; missing or
//! overflowing ⇒ unnumbered). The values key is the lowerCamel form of the kebab name and
//! must convert back to exactly the same name, otherwise the module is rejected.

/// Largest order that fits the 31-bit parse of the Go implementation.
const MAX_ORDER: u64 = (1 << 31) - 1;

/// kebab-case module name → lowerCamel values key (`cert-manager-crd` → `certManagerCrd`).
/// `-`, `_`, `.` and spaces separate words; a word after a separator starts upper-case.
pub(crate) fn values_key(module_name: &str) -> String {
    let mut out = String::with_capacity(module_name.len());
    let mut upper_next = false;
    for c in module_name.chars() {
        if is_separator(c) {
            upper_next = !out.is_empty();
            continue;
        }
        if upper_next {
            out.extend(c.to_uppercase());
            upper_next = false;
        } else if out.is_empty() {
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn is_separator(c: char) -> bool {
    matches!(c, '-' | '_' | ' ')
}

/// lowerCamel values key → kebab-case module name (`l2LoadBalancer` → `l2-load-balancer`).
/// An upper-case letter starts a new word; in a run of capitals (`HTTPServer`) the last
/// capital before a lower-case letter starts the next word (`http-server`). Digits stay in
/// the word they follow. `_` and spaces become `-`.
pub(crate) fn module_name_of_key(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    let mut out = String::with_capacity(key.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if is_separator(c) {
            push_dash(&mut out);
            continue;
        }
        if c.is_uppercase() && i > 0 && starts_word(&chars, i) {
            push_dash(&mut out);
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// Whether the capital at `i` starts a new word (see [`module_name_of_key`]).
fn starts_word(chars: &[char], i: usize) -> bool {
    let prev = chars[i - 1];
    if !prev.is_uppercase() {
        return true;
    }
    chars.get(i + 1).is_some_and(|n| n.is_lowercase())
}

fn push_dash(out: &mut String) {
    if !out.is_empty() && !out.ends_with('-') {
        out.push('-');
    }
}

/// `001-foo` → `(Some(1), "foo")`, `foo` → `(None, "foo")`; an order that does not fit 31
/// bits is dropped (unnumbered). Errors name the directory when the name is empty or does
/// not round-trip kebab → camel → kebab.
pub(crate) fn parse_dir_name(dir: &str) -> Result<(Option<u32>, String), String> {
    let (order, name) = split_order(dir);
    if name.is_empty() {
        return Err(format!("module directory '{dir}': empty module name"));
    }
    let back = module_name_of_key(&values_key(name));
    if back != name {
        return Err(format!(
            "module directory '{dir}': '{name}' name should be in kebab-case and be restorable \
             from camelCase (got '{back}' back from '{}')",
            values_key(name)
        ));
    }
    Ok((order, name.to_string()))
}

/// Splits `^(([0-9]+)-)?(.+)$`: a digit prefix followed by `-` is the order.
fn split_order(dir: &str) -> (Option<u32>, &str) {
    let digits = dir.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || dir.as_bytes().get(digits) != Some(&b'-') || dir.len() == digits + 1 {
        return (None, dir);
    }
    let order = dir[..digits]
        .parse::<u64>()
        .ok()
        .filter(|n| *n <= MAX_ORDER)
        .and_then(|n| u32::try_from(n).ok());
    (order, &dir[digits + 1..])
}
