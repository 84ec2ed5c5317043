//! The DynamoDB adapter under a hung call (DynamoDB only): its client cuts an
//! attempt at the attempt timeout and tries again. Not a port's promise but the
//! wiring's, checked through the adapter.

use degrau::store::RecordStore;
use degrau_adapters::dynamodb::DynamoStore;
use degrau_tests::moto;
use serde_json::json;

use super::{NOW, ana, commit, exchange};

/// A storage call that hangs fails over to another attempt: every AWS client of
/// degrau is built with an attempt and an operation timeout
/// (`degrau_adapters::wiring::with_timeouts`), so a read the proxy holds for a
/// minute is tried again after the attempt's limit and answers long before the
/// hold would end (without the timeouts it waits the whole minute, and the
/// test's own limit fails it).
#[tokio::test]
async fn dynamodb_a_hung_call_is_cut_at_the_attempt_timeout_and_tried_again() {
    use degrau_adapters::wiring::{ATTEMPT_TIMEOUT, OPERATION_TIMEOUT, with_timeouts};
    let direct = moto::dynamodb_client().await;
    let table = moto::fresh_table(&direct).await;
    let proxy = degrau_awsproxy::spawn(moto::endpoint()).await;
    let sdk = with_timeouts(&moto::sdk_config_at(proxy.url()).await);
    let timeouts = sdk.timeout_config().unwrap();
    assert_eq!(timeouts.operation_attempt_timeout(), Some(ATTEMPT_TIMEOUT));
    assert_eq!(timeouts.operation_timeout(), Some(OPERATION_TIMEOUT));
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), table.clone());
    let key = ana();
    commit(
        &DynamoStore::new(direct, table),
        &key,
        exchange(1, None, "hello"),
    )
    .await;

    let hung: degrau_awsproxy::Fault = serde_json::from_value(json!({
        "service": "dynamodb", "operation": "Query", "delay_ms": 60_000
    }))
    .unwrap();
    proxy.faults(vec![hung]).unwrap();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        store.load_memory(&key, NOW),
    )
    .await
    .expect("the hung attempt was cut and the call tried again");
    assert_eq!(read.unwrap().0.unwrap().last_seq, 2);
    assert!(
        proxy.pending_faults().is_empty(),
        "the first attempt was held"
    );
}
