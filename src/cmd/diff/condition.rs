//! `--fail-if EXPR`: an evalexpr expression over a diff's numbers. Checked
//! when the command line is parsed (syntax, names, a true/false result), so
//! a typo fails before any recording is read; evaluated on the diff.

use std::sync::Arc;

use evalexpr::{
    build_operator_tree, ContextWithMutableFunctions, ContextWithMutableVariables,
    DefaultNumericTypes, EvalexprError, Function, HashMapContext, Node, Value,
};

use crate::model::diff::{Diff, Waits};

type Context = HashMapContext<DefaultNumericTypes>;

/// A parsed, checked `--fail-if` expression.
#[derive(Clone, Debug)]
pub struct Condition {
    text: String,
    tree: Node<DefaultNumericTypes>,
}

impl Condition {
    /// Is the condition true of `diff`?
    pub fn holds(&self, diff: &Diff) -> Result<bool, String> {
        let context = context(Arc::new(diff.clone()))?;
        self.tree
            .eval_boolean_with_context(&context)
            .map_err(|e| format!("--fail-if `{}`: {e}", self.text))
    }

    pub fn text(&self) -> &str {
        &self.text
    }
}

/// clap's value parser: the expression, tried on an empty diff.
pub fn parse_condition(text: &str) -> Result<Condition, String> {
    let tree = build_operator_tree::<DefaultNumericTypes>(text)
        .map_err(|e| format!("`{text}` is not an expression: {e}"))?;
    let condition = Condition {
        text: text.to_string(),
        tree,
    };
    condition.holds(&Diff::empty()).map_err(|e| {
        format!("{e}\n(values: wait_ms(C), wait_ms_before(C), wait_change_pct(C), p99_ms(C), p99_ms_before(C), stalls(K), stalls_before(K), culprit_ms(N), culprit_ms_before(N), new_culprits; see `stalltop diff --help`)")
    })?;
    Ok(condition)
}

fn context(diff: Arc<Diff>) -> Result<Context, String> {
    let mut context = Context::new();
    let mut add = |name: &str, f: fn(&Diff, &str) -> Result<f64, String>| {
        let diff = Arc::clone(&diff);
        let name_owned = name.to_string();
        context
            .set_function(
                name.to_string(),
                Function::new(move |argument| {
                    let text = argument.as_string().map_err(|_| {
                        EvalexprError::CustomMessage(format!(
                            "{name_owned} takes one name in quotes, e.g. {name_owned}(\"shop\")"
                        ))
                    })?;
                    f(&diff, &text)
                        .map(Value::Float)
                        .map_err(EvalexprError::CustomMessage)
                }),
            )
            .map_err(|e| e.to_string())
    };
    add("wait_ms", |d, c| Ok(wait_ns(d, c, true)? / 1e6))?;
    add("wait_ms_before", |d, c| Ok(wait_ns(d, c, false)? / 1e6))?;
    add("wait_change_pct", |d, c| {
        let (before, after) = (rate(d, c, false)?, rate(d, c, true)?);
        Ok(if before > 0.0 {
            (after - before) / before * 100.0
        } else if after > 0.0 {
            100.0
        } else {
            0.0
        })
    })?;
    add("p99_ms", |d, c| Ok(p99_ns(d, c, true)? / 1e6))?;
    add("p99_ms_before", |d, c| Ok(p99_ns(d, c, false)? / 1e6))?;
    add("stalls", |d, k| stalls(d, k, true))?;
    add("stalls_before", |d, k| stalls(d, k, false))?;
    add("culprit_ms", |d, n| Ok(d.culprit_ns(n, true) as f64 / 1e6))?;
    add("culprit_ms_before", |d, n| {
        Ok(d.culprit_ns(n, false) as f64 / 1e6)
    })?;
    context
        .set_value(
            "new_culprits".into(),
            Value::Float(diff.new_culprits() as f64),
        )
        .map_err(|e| e.to_string())?;
    Ok(context)
}

fn stalls(d: &Diff, kind: &str, after: bool) -> Result<f64, String> {
    if !Diff::is_kind(kind) {
        return Err(format!(
            "`{kind}` is not a stall kind (runq, throttled, ksoftirqd, softirq, irqoff, or \"\")"
        ));
    }
    Ok(d.stalls(kind, after) as f64)
}

/// The waits of the containers named `name`, summed, in B (or A).
fn wait_ns(d: &Diff, name: &str, after: bool) -> Result<f64, String> {
    Ok(waits(d, name, after)?.map(|w| w.total_ns as f64).sum())
}

fn rate(d: &Diff, name: &str, after: bool) -> Result<f64, String> {
    Ok(waits(d, name, after)?.map(|w| w.ns_per_s).sum())
}

fn p99_ns(d: &Diff, name: &str, after: bool) -> Result<f64, String> {
    Ok(waits(d, name, after)?
        .map(|w| w.p99_ns as f64)
        .fold(0.0, f64::max))
}

/// The waits in B (or A) of the containers named `name` that waited there.
fn waits<'d>(
    d: &'d Diff,
    name: &str,
    after: bool,
) -> Result<impl Iterator<Item = &'d Waits> + 'd, String> {
    Ok(named(d, name)?.into_iter().filter_map(move |c| {
        if after {
            c.after.as_ref()
        } else {
            c.before.as_ref()
        }
    }))
}

/// An empty diff names nothing, and that is no error: the check at parse
/// time runs on one.
fn named<'d>(
    d: &'d Diff,
    name: &str,
) -> Result<Vec<&'d crate::model::diff::ContainerDiff>, String> {
    if name.is_empty() {
        return Err("a container name is empty".into());
    }
    Ok(d.containers_named(name).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_expressions_are_refused_with_the_reason() {
        for (expr, why) in [
            ("wait_ms(\"x\") >", "expected 2 arguments"),
            ("nonsense > 1", "nonsense"),
            ("wait_ms(\"x\")", "Boolean"),
            ("stalls(\"sleepy\") > 0", "not a stall kind"),
            ("wait_ms(3) > 1", "one name in quotes"),
        ] {
            let err = parse_condition(expr).unwrap_err();
            assert!(err.contains(why), "{expr}: {err}");
        }
    }

    /// On real recordings: a quiet run, then the same session with a noisy
    /// neighbour.
    #[test]
    fn conditions_hold_or_not_on_a_real_diff() {
        use crate::cmd::report::{report_of, tests::fixture};
        use crate::model::ReportScope;
        let quiet = report_of(&fixture("quiet"), ReportScope::default());
        let noisy = report_of(&fixture("noisy"), ReportScope::default());
        let d = crate::model::diff::diff(&quiet, &noisy);
        let holds = |expr: &str| parse_condition(expr).unwrap().holds(&d).unwrap();
        assert!(holds(
            "wait_change_pct(\"victim\") > 500 && new_culprits > 0"
        ));
        assert!(holds(
            "culprit_ms(\"hog\") > 1000 && culprit_ms_before(\"hog\") < 1"
        ));
        assert!(holds("stalls(\"runq\") > stalls_before(\"runq\")"));
        assert!(!holds("stalls(\"irqoff\") > 0 || p99_ms(\"victim\") > 100"));
        assert!(holds(
            "wait_ms(\"victim\") > 10 * wait_ms_before(\"victim\")"
        ));
    }

    #[test]
    fn good_expressions_parse() {
        for expr in [
            "wait_change_pct(\"victim\") > 50",
            "stalls(\"runq\") > 2 * stalls_before(\"runq\") || new_culprits > 0",
            "p99_ms(\"shop\") >= 10 && culprit_ms(\"hog\") > 0",
        ] {
            assert!(parse_condition(expr).is_ok(), "{expr}");
        }
    }
}
