//! [`UpdateParts`]: an update expression built clause by clause, and [`update_if`],
//! the conditional update that reads a failed condition as `Ok(false)`.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, Update};
use degrau::domain::PendingFacts;
use degrau::store::StoreError;

use crate::dynamodb::error::unless_condition_failed;
use crate::dynamodb::items::{n, s};

/// The head's attributes of a pending fact extraction (`Head::facts_pending`).
const PENDING_ATTRIBUTES: [&str; 3] = ["facts_pending", "facts_pending_since", "facts_attempts"];

/// An update's expression built clause by clause (`SET a = :a, … REMOVE b, …`),
/// with its condition (clauses joined by `AND`), names and values.
#[derive(Debug, Default)]
pub(in crate::dynamodb) struct UpdateParts {
    set: Vec<String>,
    remove: Vec<String>,
    conditions: Vec<String>,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl UpdateParts {
    /// A `SET` clause.
    pub(in crate::dynamodb) fn set(&mut self, clause: impl Into<String>) -> &mut Self {
        self.set.push(clause.into());
        self
    }

    /// A `REMOVE` clause.
    pub(in crate::dynamodb) fn remove(&mut self, attribute: impl Into<String>) -> &mut Self {
        self.remove.push(attribute.into());
        self
    }

    /// A clause of the condition.
    pub(in crate::dynamodb) fn condition(&mut self, clause: impl Into<String>) -> &mut Self {
        self.conditions.push(clause.into());
        self
    }

    /// An attribute name placeholder (`#name`).
    pub(in crate::dynamodb) fn name(&mut self, placeholder: &str, attribute: &str) -> &mut Self {
        self.names
            .insert(placeholder.to_owned(), attribute.to_owned());
        self
    }

    /// A value placeholder (`:value`).
    pub(in crate::dynamodb) fn value(
        &mut self,
        placeholder: &str,
        value: AttributeValue,
    ) -> &mut Self {
        self.values.insert(placeholder.to_owned(), value);
        self
    }

    /// `SET attribute = :attribute` with `value`, or `REMOVE attribute` without one.
    pub(in crate::dynamodb) fn set_or_remove(
        &mut self,
        attribute: &str,
        value: Option<AttributeValue>,
    ) -> &mut Self {
        match value {
            Some(value) => self
                .set(format!("{attribute} = :{attribute}"))
                .value(&format!(":{attribute}"), value),
            None => self.remove(attribute),
        }
    }

    /// Sets the pending fact extraction (`Head::facts_pending`).
    pub(in crate::dynamodb) fn pending(&mut self, pending: PendingFacts) -> &mut Self {
        self.set("facts_pending = :facts_pending")
            .set("facts_pending_since = :facts_pending_since")
            .set("facts_attempts = :facts_attempts")
            .value(":facts_pending", n(pending.session))
            .value(":facts_pending_since", n(pending.since))
            .value(":facts_attempts", n(pending.attempts))
    }

    /// Removes the pending fact extraction.
    pub(in crate::dynamodb) fn remove_pending(&mut self) -> &mut Self {
        for attribute in PENDING_ATTRIBUTES {
            self.remove(attribute);
        }
        self
    }

    /// `SET a, b REMOVE c, d`, leaving out an empty part.
    fn expression(&self) -> String {
        let mut parts = Vec::with_capacity(2);
        if !self.set.is_empty() {
            parts.push(format!("SET {}", self.set.join(", ")));
        }
        if !self.remove.is_empty() {
            parts.push(format!("REMOVE {}", self.remove.join(", ")));
        }
        parts.join(" ")
    }

    /// The condition, when there is one.
    fn condition_expression(&self) -> Option<String> {
        (!self.conditions.is_empty()).then(|| self.conditions.join(" AND "))
    }

    /// A map for the request, or none when empty (DynamoDB refuses an empty one).
    fn non_empty<V>(map: HashMap<String, V>) -> Option<HashMap<String, V>> {
        (!map.is_empty()).then_some(map)
    }

    /// The update of item `pk`/`sk` in a transaction; `what` names it in errors.
    pub(in crate::dynamodb) fn update(
        self,
        table: &str,
        pk: &str,
        sk: &str,
        what: &str,
    ) -> Result<Update, StoreError> {
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(self.expression())
            .set_condition_expression(self.condition_expression())
            .set_expression_attribute_names(Self::non_empty(self.names))
            .set_expression_attribute_values(Self::non_empty(self.values))
            .build()
            .map_err(|err| StoreError::Other(format!("{what} update: {err}")))
    }

    /// These parts on a single `UpdateItem`.
    pub(in crate::dynamodb) fn apply(
        self,
        update: UpdateItemFluentBuilder,
    ) -> UpdateItemFluentBuilder {
        update
            .update_expression(self.expression())
            .set_condition_expression(self.condition_expression())
            .set_expression_attribute_names(Self::non_empty(self.names))
            .set_expression_attribute_values(Self::non_empty(self.values))
    }
}

/// Sends a single conditional update; `Ok(false)` when its condition failed.
pub(in crate::dynamodb) async fn update_if(
    update: UpdateItemFluentBuilder,
) -> Result<bool, StoreError> {
    let result = update.send().await;
    Ok(unless_condition_failed("update_item", result)?.is_some())
}
