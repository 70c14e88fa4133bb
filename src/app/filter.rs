//! What the user typed after `/` and `c`, parsed into matchers: text terms
//! (`comm:`, `container:`, `path:`, `cpu:` or bare words) and a CPU set.
//! Pure; the view builder asks them about rows.

use crate::cpulist::CpuList;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Comm,
    Container,
    Path,
    Cpu,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Term {
    /// None: a bare word, matched against every text field.
    field: Option<Field>,
    /// Lowercase.
    text: String,
}

/// Every term must match (AND); matching is case-insensitive substring.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextFilter {
    terms: Vec<Term>,
    /// As typed, for the header and to edit again.
    pub source: String,
}

/// What one row offers to a filter. A field its table does not have
/// (None) does not restrict it: `cpu:1` leaves the containers table alone,
/// and words leave a row without text (a CPU row) alone. A field the table
/// has but the row lacks (an empty list: a stall nobody was seen causing)
/// matches no term on it.
#[derive(Default)]
pub struct RowText<'a> {
    pub comm: Option<Vec<&'a str>>,
    pub container: Option<Vec<&'a str>>,
    pub path: Option<Vec<&'a str>>,
    pub cpu: Option<u32>,
    /// Other words bare terms may hit (syscall names, kinds).
    pub other: Vec<&'a str>,
}

impl TextFilter {
    pub fn parse(text: &str) -> Result<TextFilter, String> {
        let mut terms = Vec::new();
        for word in text.split_whitespace() {
            let (field, value) = match word.split_once(':') {
                Some(("comm", v)) => (Some(Field::Comm), v),
                Some(("container", v)) => (Some(Field::Container), v),
                Some(("path", v)) => (Some(Field::Path), v),
                Some(("cpu", v)) => {
                    v.parse::<u32>()
                        .map_err(|_| format!("`{word}`: cpu: takes a CPU number"))?;
                    (Some(Field::Cpu), v)
                }
                // "pod:1234", "docker:ab12": container ids have colons too.
                _ => (None, word),
            };
            if value.is_empty() {
                return Err(format!("`{word}` has nothing after the colon"));
            }
            terms.push(Term {
                field,
                text: value.to_lowercase(),
            });
        }
        Ok(TextFilter {
            terms,
            source: text.split_whitespace().collect::<Vec<_>>().join(" "),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn matches(&self, row: &RowText<'_>) -> bool {
        let hit =
            |values: &[&str], text: &str| values.iter().any(|v| v.to_lowercase().contains(text));
        let field = |values: &Option<Vec<&str>>, text: &str| {
            values.as_ref().is_none_or(|values| hit(values, text))
        };
        let fields = [&row.comm, &row.container, &row.path];
        let has_text = fields.iter().any(|f| f.is_some()) || !row.other.is_empty();
        let texts: Vec<&str> = fields
            .into_iter()
            .flatten()
            .flatten()
            .chain(&row.other)
            .copied()
            .collect();
        self.terms.iter().all(|term| match term.field {
            Some(Field::Comm) => field(&row.comm, &term.text),
            Some(Field::Container) => field(&row.container, &term.text),
            Some(Field::Path) => field(&row.path, &term.text),
            Some(Field::Cpu) => row.cpu.is_none_or(|cpu| cpu.to_string() == term.text),
            None => !has_text || hit(&texts, &term.text),
        })
    }
}

/// CPUs picked with `c`, as a cpulist ("0-3,8"); empty means all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuSet {
    cpus: CpuList,
    pub source: String,
}

impl CpuSet {
    /// A pick among the `online` CPUs.
    pub fn parse(text: &str, online: &CpuList) -> Result<CpuSet, String> {
        let cpus = CpuList::parse(text)?;
        if let Some(offline) = cpus.iter().find(|&cpu| !online.contains(cpu)) {
            return Err(format!("CPU {offline} is not online (online: {online})"));
        }
        Ok(CpuSet {
            cpus,
            source: text.trim().to_string(),
        })
    }

    pub fn is_all(&self) -> bool {
        self.cpus.is_empty()
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.cpus.is_empty() || self.cpus.contains(cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(comm: &'a str, container: &'a str, cpu: Option<u32>) -> RowText<'a> {
        RowText {
            comm: Some(vec![comm]),
            container: Some(vec![container]),
            cpu,
            ..RowText::default()
        }
    }

    #[test]
    fn terms_and_together_and_ignore_missing_fields() {
        let f = TextFilter::parse("comm:HOG cpu:1").unwrap();
        assert!(f.matches(&row("hog", "/noisy", Some(1))));
        assert!(!f.matches(&row("hog", "/noisy", Some(0))));
        assert!(!f.matches(&row("victim", "/v", Some(1))));
        // a container row has no cpu and no comm: only the fields it has count
        let container_row = RowText {
            container: Some(vec!["/noisy"]),
            ..RowText::default()
        };
        assert!(f.matches(&container_row));
        // A stall nobody was seen causing has no comm to match.
        let nobody = RowText {
            comm: Some(vec![]),
            cpu: Some(1),
            ..RowText::default()
        };
        assert!(!f.matches(&nobody));
        assert!(!TextFilter::parse("hog").unwrap().matches(&nobody));
        let cpu_row = RowText {
            cpu: Some(1),
            ..RowText::default()
        };
        assert!(TextFilter::parse("hog cpu:1").unwrap().matches(&cpu_row));
        let bare = TextFilter::parse("noisy").unwrap();
        assert!(bare.matches(&row("hog", "/noisy", None)));
        assert!(!bare.matches(&row("hog", "/v", None)));
        assert!(TextFilter::parse("pod:12ab")
            .unwrap()
            .matches(&row("x", "pod:12ab/c", None)));
    }

    #[test]
    fn bad_filters_say_why() {
        assert!(TextFilter::parse("cpu:x")
            .unwrap_err()
            .contains("CPU number"));
        assert!(TextFilter::parse("comm:")
            .unwrap_err()
            .contains("nothing after"));
        assert!(TextFilter::parse("  ").unwrap().is_empty());
    }

    #[test]
    fn cpu_picks_are_among_the_online_cpus() {
        let online = CpuList::parse("0-3,8").unwrap();
        let s = CpuSet::parse("0-2, 8", &online).unwrap();
        assert!(s.contains(1) && s.contains(8) && !s.contains(3));
        assert!(CpuSet::parse("", &online).unwrap().is_all());
        assert_eq!(
            CpuSet::parse("4", &online).unwrap_err(),
            "CPU 4 is not online (online: 0-3,8)"
        );
        assert!(CpuSet::parse("a", &online).is_err());
    }
}
