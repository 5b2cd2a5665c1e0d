//! Prints every change of one key: `cargo run -p nacelle-client --example watch -- app.yaml`.

use futures::StreamExt;
use nacelle_client::Client;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data_id = std::env::args().nth(1).unwrap_or_else(|| "app.yaml".into());
    let server = std::env::var("NACELLE_SERVER").unwrap_or_else(|_| "127.0.0.1:8848".into());
    let client = Client::builder().server_addrs([server]).build().await?;
    let mut watch = client.watch(data_id.as_str()).await?;
    match watch.initial() {
        Some(c) => println!("now ({}):\n{}", c.md5, c.content),
        None => println!("{data_id} does not exist yet"),
    }
    while let Some(change) = watch.next().await {
        match change.config {
            Some(c) => println!("changed ({}):\n{}", c.md5, c.content),
            None => println!("removed"),
        }
    }
    Ok(())
}
