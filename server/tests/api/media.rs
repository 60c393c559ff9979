//! The media library: an upload of each format (through the API and the editor's
//! session route), disguised, SVG and oversized files refused, the same image stored once, the
//! quota per workspace and per account, and serving: the right headers, never another
//! workspace's image, and a deleted one gone.

use image::{ExtendedColorType, ImageEncoder, Rgba, RgbaImage};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use sha2::Digest as _;

use crate::helpers::*;

/// A PNG of noise (it does not compress): about `side² × 4` bytes, different per `seed`.
fn noise_png(side: u32, seed: u32) -> Vec<u8> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    let img = RgbaImage::from_fn(side, side, |_, _| {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let [a, b, c, d] = state.to_le_bytes();
        Rgba([a, b, c, d | 1])
    });
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(img.as_raw(), side, side, ExtendedColorType::Rgba8)
        .expect("png");
    out
}

fn encoded(format: image::ImageFormat) -> Vec<u8> {
    let img = image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(64, 32, |x, y| {
        image::Rgb([x as u8 * 4, y as u8 * 8, 90])
    }));
    let mut out = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut out), format).expect("encode");
    out
}

/// Sends `bytes` as the multipart field `file` with `request`; the status and JSON answer.
async fn send_upload(request: reqwest::RequestBuilder, name: &str, mime: &str, bytes: Vec<u8>) -> (StatusCode, Value) {
    let part = reqwest::multipart::Part::bytes(bytes).file_name(name.to_string()).mime_str(mime).expect("mime");
    let res = request.multipart(reqwest::multipart::Form::new().part("file", part)).send().await.expect("upload");
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn upload_api(api: &Api, name: &str, mime: &str, bytes: Vec<u8>) -> (StatusCode, Value) {
    let request = api.client.post(format!("{}/api/v1/media", api.base)).bearer_auth(&api.key);
    send_upload(request, name, mime, bytes).await
}

/// The editor's route: a member's session, same origin.
async fn upload_session(b: &Browser, name: &str, bytes: Vec<u8>) -> (StatusCode, Value) {
    let request = b.client.post(format!("{}/media/upload", b.base)).header("Origin", &b.base);
    send_upload(request, name, "application/octet-stream", bytes).await
}

fn url(v: &Value) -> String {
    v["url"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn images_are_uploaded_re_encoded_served_immutably_and_never_across_workspaces() -> TestResult {
    let app = spawn_app().await;
    let (owner, workspace) = app.owner_with_workspace("media@example.com", "Media").await;
    let api = Api::for_owner(&app, &owner).await;
    let (other, other_workspace) = app.owner_with_workspace("other-media@example.com", "Other").await;
    let other_api = Api::for_owner(&app, &other).await;

    // A PNG through the API.
    let png = noise_png(40, 1);
    let (status, stored) = upload_api(&api, "noise.png", "image/png", png.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{stored}");
    let png_url = url(&stored);
    let prefix = format!("{}/media/{workspace}/", app.base);
    assert!(png_url.starts_with(&prefix) && png_url.ends_with(".png"), "{png_url}");
    let hash = png_url[prefix.len()..png_url.len() - 4].to_string();
    assert_eq!(hash.len(), 64);
    assert_eq!((stored["width"].as_i64(), stored["height"].as_i64()), (Some(40), Some(40)));

    // Served to anyone, with headers that let every cache keep it forever and no browser
    // guess another type.
    let public = reqwest::Client::new();
    for _ in 0..2 {
        // The second answer comes from the cache: the same bytes and headers.
        let res = public.get(&png_url).send().await?;
        assert_eq!(res.status(), StatusCode::OK);
        let headers = res.headers().clone();
        assert_eq!(headers["content-type"], "image/png");
        assert_eq!(headers["cache-control"], "public, max-age=31536000, immutable");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        let body = res.bytes().await?;
        assert_eq!(hex::encode(sha2::Sha256::digest(&body)), hash, "the name is the hash of what is served");
        assert_eq!(image::load_from_memory(&body)?.width(), 40);
    }
    // Never under another workspace's id, another extension, or a name that is not a hash.
    for wrong in [
        format!("{}/media/{other_workspace}/{hash}.png", app.base),
        format!("{}/media/{workspace}/{hash}.jpg", app.base),
        format!("{}/media/{workspace}/{}.png", app.base, hash.to_uppercase()),
        format!("{}/media/{workspace}/{}.png", app.base, &hash[..63]),
        format!("{}/media/not-a-workspace/{hash}.png", app.base),
        format!("{}/media/{workspace}/{hash}", app.base),
    ] {
        assert_eq!(public.get(&wrong).send().await?.status(), StatusCode::NOT_FOUND, "{wrong}");
    }

    // JPEG, GIF and WebP through the editor's session route; WebP is stored as JPEG (mail
    // clients show no WebP).
    for (name, format, want) in [
        ("photo.jpg", image::ImageFormat::Jpeg, "image/jpeg"),
        ("anim.gif", image::ImageFormat::Gif, "image/gif"),
        ("modern.webp", image::ImageFormat::WebP, "image/jpeg"),
    ] {
        let (status, stored) = upload_session(&owner, name, encoded(format)).await;
        assert_eq!(status, StatusCode::CREATED, "{name}: {stored}");
        assert_eq!(stored["content_type"], want, "{name}");
        assert_eq!(stored["file_name"], name);
        let res = public.get(url(&stored)).send().await?;
        assert_eq!(res.headers()["content-type"], want);
    }
    // The same image again is the same entry.
    let (status, again) = upload_api(&api, "copy.png", "image/png", png).await;
    assert_eq!((status, url(&again)), (StatusCode::CREATED, png_url.clone()));

    // Refused, with the reason beside the field: a script named .png, an SVG, a broken file,
    // one over 10 MB.
    let refusals = [
        ("shell.png", b"<?php system($_GET['c']); ?>".to_vec(), "PNG, JPEG, GIF or WebP"),
        ("logo.svg", br#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#.to_vec(), "SVG"),
        ("half.png", noise_png(30, 2)[..200].to_vec(), "not a valid image"),
        ("huge.png", vec![0u8; 10 * 1024 * 1024 + 1], "at most 10 MB"),
    ];
    for (name, bytes, why) in refusals {
        let (status, body) = upload_api(&api, name, "image/png", bytes).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{name}: {body}");
        assert!(body["fields"]["file"].as_str().is_some_and(|m| m.contains(why)), "{name}: {body}");
    }

    // The library lists four images; the other workspace sees none of them and cannot delete one.
    let (status, library) = api.get("/api/v1/media").await;
    assert_eq!(status, StatusCode::OK, "{library}");
    assert_eq!(library["items"].as_array().map(Vec::len), Some(4), "{library}");
    assert!(library["used_bytes"].as_i64().unwrap_or(0) > 0);
    let (_, theirs) = other_api.get("/api/v1/media").await;
    assert_eq!(theirs["items"].as_array().map(Vec::len), Some(0), "{theirs}");
    let id = stored["id"].as_str().unwrap_or_default().to_string();
    let (status, _) = other_api.send(Method::DELETE, &format!("/api/v1/media/{id}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(public.get(&png_url).send().await?.status(), StatusCode::OK);

    // Deleted: the address answers 404 at once (the cache forgets it too).
    let (status, _) = api.send(Method::DELETE, &format!("/api/v1/media/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(public.get(&png_url).send().await?.status(), StatusCode::NOT_FOUND);
    let (status, _) = api.send(Method::DELETE, &format!("/api/v1/media/{id}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A viewer may look but not upload.
    let (status, _) = upload_session(&app.browser(), "anon.png", noise_png(8, 3)).await;
    assert!(status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN, "{status}");

    // Documented, with their own operation ids.
    let doc: Value = reqwest::get(format!("{}/api/v1/openapi.json", app.base)).await?.json().await?;
    let ops: Vec<&str> = [("/api/v1/media", "get"), ("/api/v1/media", "post"), ("/api/v1/media/{id}", "delete")]
        .iter()
        .map(|(p, m)| doc["paths"][*p][*m]["operationId"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(ops, ["listMedia", "uploadMedia", "deleteMedia"]);
    Ok(())
}

#[tokio::test]
async fn the_media_quota_holds_per_workspace_and_per_account() -> TestResult {
    // Each noise image is about 6.5 KB: one fits a workspace, two do not; the account's two
    // workspaces share 12 KB.
    let app = spawn_app_with(&[
        ("HERALD_MEDIA_STORAGE_PER_WORKSPACE", "10000"),
        ("HERALD_MEDIA_STORAGE_PER_ACCOUNT", "12000"),
    ])
    .await;
    let (owner, _) = app.owner_with_workspace("quota@example.com", "First").await;
    let first = Api::for_owner(&app, &owner).await;
    let (status, body) = upload_api(&first, "a.png", "image/png", noise_png(40, 10)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let size = body["bytes"].as_i64().unwrap_or(0);
    assert!((6_000..10_000).contains(&size), "a noise image is about 6.5 KB: {size}");
    let (status, body) = upload_api(&first, "b.png", "image/png", noise_png(40, 11)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["fields"]["file"].as_str().is_some_and(|m| m.contains("media library is full")), "{body}");
    // A library with no room left refuses an upload before decoding it, so a workspace over its
    // quota cannot keep the process's decode slots busy: these bytes are not even an image.
    sqlx::query("UPDATE media SET bytes = 10000").execute(&app.owner).await?;
    let (status, body) = upload_api(&first, "junk.png", "image/png", b"not an image at all".to_vec()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["fields"]["file"].as_str().is_some_and(|m| m.contains("media library is full")), "{body}");

    // A second workspace of the same account: its own library is empty, but the account's
    // images would pass 12 KB.
    owner.run(herald_app::auth::CreateWorkspace { name: "Second".into(), slug: String::new() }).await.value();
    let second = Api::for_owner(&app, &owner).await;
    let (_, library) = second.get("/api/v1/media").await;
    assert_eq!(library["items"].as_array().map(Vec::len), Some(0), "a new workspace: {library}");
    let (status, body) = upload_api(&second, "c.png", "image/png", noise_png(40, 12)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["fields"]["file"].as_str().is_some_and(|m| m.contains("account")), "{body}");
    // Deleting the first workspace's image makes room.
    let (_, library) = first.get("/api/v1/media").await;
    let id = library["items"][0]["id"].as_str().unwrap_or_default().to_string();
    assert_eq!(first.send(Method::DELETE, &format!("/api/v1/media/{id}"), None).await.0, StatusCode::NO_CONTENT);
    let (status, body) = upload_api(&second, "c.png", "image/png", noise_png(40, 12)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    Ok(())
}

#[tokio::test]
async fn images_live_in_an_s3_bucket_when_one_is_configured() -> TestResult {
    use object_store::ObjectStoreExt as _;
    let mut moto = Moto::start().await;
    moto.create_bucket("herald-media").await;
    let app = spawn_app_with(&moto.settings("herald-media")).await;
    let (owner, workspace) = app.owner_with_workspace("s3-media@example.com", "Bucket").await;
    let api = Api::for_owner(&app, &owner).await;
    let bucket = moto.client("herald-media");

    let png = noise_png(32, 7);
    let (status, stored) = upload_api(&api, "noise.png", "image/png", png).await;
    assert_eq!(status, StatusCode::CREATED, "{stored}");
    let image_url = url(&stored);
    let hash = image_url.rsplit('/').next().and_then(|f| f.strip_suffix(".png")).expect("a hash").to_string();
    let id = stored["id"].as_str().expect("an id").to_string();
    // The bytes are the row's object in the bucket, not a row in Postgres.
    let object = object_store::path::Path::from(format!("media/{workspace}/{hash}/{id}"));
    let in_bucket = bucket.get(&object).await?.bytes().await?;
    assert_eq!(hex::encode(sha2::Sha256::digest(&in_bucket)), hash);
    let blobs: i64 = sqlx::query_scalar("SELECT count(*) FROM media_blobs").fetch_one(&app.owner).await?;
    assert_eq!(blobs, 0, "nothing stored in Postgres");
    // Served from there, with the same headers as ever.
    let public = reqwest::Client::new();
    let res = public.get(&image_url).send().await?;
    assert_eq!(
        (res.status(), res.headers()["cache-control"].clone()),
        (StatusCode::OK, "public, max-age=31536000, immutable".parse()?)
    );
    assert_eq!(res.bytes().await?, in_bucket);

    // Deleted: the address answers 404 and the object leaves the bucket (in a task of its own,
    // so a dropped request still finishes it: waited for here).
    let (status, _) = api.send(Method::DELETE, &format!("/api/v1/media/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(public.get(&image_url).send().await?.status(), StatusCode::NOT_FOUND);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while bucket.get(&object).await.is_ok() {
        assert!(std::time::Instant::now() < deadline, "the deleted image's object stayed in the bucket");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Uploaded again: a new row with an object of its own, served.
    let (status, again) = upload_api(&api, "noise.png", "image/png", noise_png(32, 7)).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_ne!(again["id"], stored["id"]);
    assert_eq!(public.get(&image_url).send().await?.status(), StatusCode::OK);

    // An account deleted with its workspace: the workspace's objects leave the bucket too.
    let (leaving, leaving_workspace) = app.owner_with_workspace("s3-leaving@example.com", "Leaving").await;
    let leaving_api = Api::for_owner(&app, &leaving).await;
    let (status, _) = upload_api(&leaving_api, "mine.png", "image/png", noise_png(24, 9)).await;
    assert_eq!(status, StatusCode::CREATED);
    let leaving_prefix = format!("media/{leaving_workspace}");
    assert_eq!(listed_len(&bucket, &leaving_prefix).await, 1);
    let gone = leaving
        .run(herald_app::pages::account::overview::DeleteAccount { current_password: "correct horse battery".into() })
        .await;
    assert!(gone.ok(), "{}", gone.message());
    assert_eq!(listed_len(&bucket, &leaving_prefix).await, 0, "the deleted workspace's images are gone");
    assert_eq!(listed_len(&bucket, &format!("media/{workspace}")).await, 1, "another workspace's stay");

    // The bucket unreachable: the upload is refused with a message that says so (no host, no
    // key), promptly, and leaves no row that would serve nothing.
    moto.stop();
    let started = std::time::Instant::now();
    let (status, body) = upload_api(&api, "later.png", "image/png", noise_png(32, 8)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("Image storage cannot be reached")), "{body}");
    assert!(!body.to_string().contains("127.0.0.1"), "no address reaches the author: {body}");
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "gave up after {:?}", started.elapsed());
    let (_, library) = api.get("/api/v1/media").await;
    assert_eq!(library["items"].as_array().map(Vec::len), Some(1), "{library}");
    Ok(())
}

async fn listed_len(bucket: &object_store::aws::AmazonS3, prefix: &str) -> usize {
    use futures::TryStreamExt as _;
    use object_store::ObjectStore as _;
    let prefix = object_store::path::Path::from(prefix);
    bucket.list(Some(&prefix)).try_collect::<Vec<_>>().await.map(|v| v.len()).unwrap_or(usize::MAX)
}
