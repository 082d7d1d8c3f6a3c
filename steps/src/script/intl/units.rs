//! How each locale writes ECMA-402's units (`12 km/h`, `1,5 Megabyte`),
//! recorded from Node's ICU by `scripts/intl_units.js` (ICU4X has the
//! units of a few measures only).

/// Blocks per locale (`@de`), then `unit width<TAB>category=pattern…`;
/// a locale's line equal to its fallback's is left out.
const UNITS: &str = include_str!("units.txt");

/// The fallback the recording left lines out by: `de-AT` → `de` → `en`.
fn fallback(locale: &str) -> Option<&str> {
    match locale.rfind('-') {
        Some(at) => Some(&locale[..at]),
        None if locale != "en" => Some("en"),
        None => None,
    }
}

/// The lines of `locale`'s block, if it has one.
fn block(locale: &str) -> Option<&'static str> {
    let head = format!("@{locale}\n");
    let start = if UNITS.starts_with(&head) {
        head.len()
    } else {
        UNITS.find(&format!("\n{head}"))? + head.len() + 1
    };
    let rest = &UNITS[start..];
    Some(&rest[..rest.find("\n@").map_or(rest.len(), |end| end + 1)])
}

/// Whether `unit` is one the table has (the simple units, and the
/// compounds CLDR names itself).
pub(super) fn known(unit: &str) -> bool {
    let found = super::cached(format!("known {unit}"), || {
        Ok::<_, ()>(patterns("en", unit, "short").is_some())
    });
    found.is_ok_and(|known| *known)
}

/// `unit`'s patterns at `width` (`short`, `long`, `narrow`) in `locale`
/// or its nearest fallback: `(plural category, pattern)`, `{0}` where the
/// number stands.
pub(super) fn patterns(locale: &str, unit: &str, width: &str) -> Option<Vec<(String, String)>> {
    let w = match width {
        "long" => "l",
        "narrow" => "n",
        _ => "s",
    };
    let key = format!("{unit} {w}\t");
    let mut tag = locale.split("-u-").next().unwrap_or(locale);
    loop {
        let found = block(tag).and_then(|lines| {
            lines
                .lines()
                .find_map(|line| line.strip_prefix(key.as_str()))
        });
        if let Some(found) = found {
            return Some(
                found
                    .split('\t')
                    .filter_map(|p| p.split_once('='))
                    .map(|(c, p)| (c.to_string(), p.to_string()))
                    .collect(),
            );
        }
        tag = fallback(tag)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regional_locale_falls_back_to_its_language_then_to_english() {
        let km = |l: &str| patterns(l, "kilometer-per-hour", "long").unwrap();
        assert!(km("en").contains(&("one".into(), "{0} kilometer per hour".into())));
        assert_eq!(km("en-US"), km("en"));
        assert_eq!(km("de-AT-u-nu-latn"), km("de-AT"));
        assert!(km("de").iter().all(|(_, p)| p.contains("Kilometer")));
        assert!(known("megabyte") && known("mile-per-hour"));
        assert!(!known("furlong") && !known("megabyte-per-fortnight"));
    }
}
