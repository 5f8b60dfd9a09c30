// A ConfigMap labeller on kube-rs, written for bench/run.ts --peers (bench/README.md, "Peers"): a
// metadata-only watcher whose reflector caches each object with its managedFields cleared, a
// Controller at a fixed concurrency, and a forced server-side apply of one label under its own
// field manager wherever the cached object lacks it. Logs one line once its cache is synced,
// nothing per object.
//
//   KUBECONFIG=… labeller-peer-kube-rs --namespace NS|--all-namespaces --label K=V \
//     --field-manager NAME --concurrency N
use std::{env, process, sync::Arc, time::Duration};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams},
    core::PartialObjectMeta,
    runtime::{
        WatchStreamExt,
        controller::{Action, Config, Controller},
        reflector, watcher,
    },
};
use serde_json::json;

struct Options {
    namespace: Option<String>,
    key: String,
    value: String,
    field_manager: String,
    concurrency: u16,
}

const USAGE: &str = "usage: labeller-peer-kube-rs --namespace NS|--all-namespaces --label K=V --field-manager NAME --concurrency N";

fn options() -> Result<Options, String> {
    let mut namespace = None;
    let mut all = false;
    let mut label = None;
    let mut field_manager = None;
    let mut concurrency = None;
    let mut args = env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--namespace" => namespace = Some(value()?),
            "--all-namespaces" => all = true,
            "--label" => label = Some(value()?),
            "--field-manager" => field_manager = Some(value()?),
            "--concurrency" => {
                let text = value()?;
                concurrency = Some(
                    text.parse::<u16>()
                        .map_err(|_| format!("--concurrency {text}: not a number"))?,
                );
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if namespace.is_some() == all {
        return Err("give one of --namespace NS and --all-namespaces".into());
    }
    let label = label.ok_or("--label K=V is required")?;
    let (key, value) = label
        .split_once('=')
        .ok_or(format!("--label {label}: expected K=V"))?;
    Ok(Options {
        namespace,
        key: key.to_string(),
        value: value.to_string(),
        field_manager: field_manager.ok_or("--field-manager is required")?,
        concurrency: concurrency.ok_or("--concurrency is required")?,
    })
}

struct Context {
    client: Client,
    options: Options,
}

async fn reconcile(
    object: Arc<PartialObjectMeta<ConfigMap>>,
    ctx: Arc<Context>,
) -> Result<Action, kube::Error> {
    let o = &ctx.options;
    if object.labels().get(&o.key) == Some(&o.value) {
        return Ok(Action::await_change());
    }
    let (name, namespace) = (object.name_any(), object.namespace().unwrap_or_default());
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
    let body = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": namespace, "labels": { o.key.as_str(): o.value.as_str() } },
    });
    api.patch_metadata(
        &name,
        &PatchParams::apply(&o.field_manager).force(),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(Action::await_change())
}

fn error_policy(
    _: Arc<PartialObjectMeta<ConfigMap>>,
    error: &kube::Error,
    _: Arc<Context>,
) -> Action {
    eprintln!("reconcile failed: {error}");
    Action::requeue(Duration::from_secs(5))
}

#[tokio::main]
async fn main() {
    let options = options().unwrap_or_else(|message| {
        eprintln!("labeller-peer-kube-rs: {message}\n{USAGE}");
        process::exit(2);
    });
    let client = Client::try_default().await.unwrap_or_else(|error| {
        eprintln!("labeller-peer-kube-rs: no client: {error}");
        process::exit(1);
    });
    // Api<PartialObjectMeta<_>> lists and watches metadata only.
    let api: Api<PartialObjectMeta<ConfigMap>> = match &options.namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let (reader, writer) = reflector::store();
    let cached = reader.clone();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|object| object.managed_fields_mut().clear())
        .reflect(writer)
        // The reflector has swapped the listed objects in by the time InitDone comes out of it.
        // (A task of its own awaiting Store::wait_until_ready was never woken here.)
        .inspect_ok(move |event| {
            if let watcher::Event::InitDone = event {
                eprintln!("synced: {} objects cached", cached.state().len());
            }
        })
        .applied_objects();
    let concurrency = options.concurrency;
    Controller::for_stream(stream, reader)
        .with_config(Config::default().concurrency(concurrency))
        .shutdown_on_signal()
        .run(
            reconcile,
            error_policy,
            Arc::new(Context { client, options }),
        )
        .for_each(|_| futures::future::ready(()))
        .await;
}
