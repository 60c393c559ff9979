//! Uploads of each format, and the ones that must be refused.

use image::{ExtendedColorType, ImageEncoder, Rgba, RgbaImage};

use super::*;

fn png(width: u32, height: u32) -> Vec<u8> {
    let img = RgbaImage::from_fn(width, height, |x, y| Rgba([(x % 256) as u8, (y % 256) as u8, 90, 200]));
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(img.as_raw(), width, height, ExtendedColorType::Rgba8)
        .expect("png");
    out
}

/// A 4×2 JPEG whose EXIF says "rotate 90° clockwise to show" (orientation 6), with a camera
/// model a reader should never see.
fn rotated_jpeg() -> Vec<u8> {
    let pixels: Vec<u8> = (0..4 * 2).flat_map(|i| [i as u8 * 30, 100, 150]).collect();
    let mut exif = b"II\x2a\x00\x08\x00\x00\x00\x02\x00\x12\x01\x03\x00\x01\x00\x00\x00\x06\x00\x00\x00".to_vec();
    exif.extend_from_slice(b"\x10\x01\x02\x00\x0c\x00\x00\x00\x26\x00\x00\x00\x00\x00\x00\x00SecretCam-9\x00");
    let mut out = Vec::new();
    let mut encoder = image::codecs::jpeg::JpegEncoder::new(&mut out);
    encoder.set_exif_metadata(exif).expect("exif");
    encoder.write_image(&pixels, 4, 2, ExtendedColorType::Rgb8).expect("jpeg");
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_png_stays_png_named_by_the_hash_of_what_is_stored() {
    let upload = png(40, 20);
    let p = prepare(&upload).expect("accepted");
    assert_eq!((p.kind, p.width, p.height), (ImageKind::Png, 40, 20));
    assert_eq!(p.hash, hex::encode(Sha256::digest(&p.bytes)));
    assert_eq!(image::guess_format(&p.bytes).ok(), Some(ImageFormat::Png));
}

#[test]
fn a_jpeg_is_turned_upright_and_loses_its_exif() {
    let upload = rotated_jpeg();
    assert!(contains(&upload, b"SecretCam-9"), "the fixture carries EXIF");
    let p = prepare(&upload).expect("accepted");
    assert_eq!((p.kind, p.width, p.height), (ImageKind::Jpeg, 2, 4), "rotated by its orientation");
    assert!(!contains(&p.bytes, b"SecretCam-9") && !contains(&p.bytes, b"Exif"), "no metadata is kept");
}

#[test]
fn wide_images_are_scaled_to_twice_the_mail_width() {
    let p = prepare(&png(3000, 1500)).expect("accepted");
    assert_eq!((p.width, p.height), (MAX_STORED_WIDTH, 600));
    let back = image::load_from_memory(&p.bytes).expect("decodes");
    assert_eq!((back.width(), back.height()), (1200, 600));
}

#[test]
fn a_gif_keeps_its_frames_but_not_its_comments_and_a_webp_becomes_jpeg_or_png() {
    let frames = [Rgba([10, 200, 30, 255]), Rgba([200, 10, 30, 255])];
    let mut gif = Vec::new();
    {
        let mut encoder = image::codecs::gif::GifEncoder::new(&mut gif);
        for colour in frames {
            let frame = image::Frame::new(RgbaImage::from_pixel(8, 8, colour));
            encoder.encode_frame(frame).expect("frame");
        }
    }
    // A comment extension before the trailer: metadata a reader should not get.
    let trailer = gif.pop();
    assert_eq!(trailer, Some(0x3B));
    gif.extend_from_slice(&[0x21, 0xFE, 11]);
    gif.extend_from_slice(b"SecretNotes");
    gif.extend_from_slice(&[0x00, 0x3B]);
    let p = prepare(&gif).expect("accepted");
    assert_eq!((p.kind, p.width, p.height), (ImageKind::Gif, 8, 8));
    assert!(!contains(&p.bytes, b"SecretNotes"), "the comment is gone");
    use image::AnimationDecoder as _;
    let kept = image::codecs::gif::GifDecoder::new(Cursor::new(&p.bytes)).expect("a gif").into_frames().count();
    assert_eq!(kept, 2, "it still moves");

    let opaque = image::DynamicImage::ImageRgb8(image::RgbImage::from_pixel(16, 16, image::Rgb([1, 2, 3])));
    let mut webp = Vec::new();
    opaque.write_to(&mut Cursor::new(&mut webp), ImageFormat::WebP).expect("webp");
    assert_eq!(prepare(&webp).expect("accepted").kind, ImageKind::Jpeg);
    let clear = image::DynamicImage::ImageRgba8(RgbaImage::from_pixel(16, 16, Rgba([1, 2, 3, 0])));
    let mut webp = Vec::new();
    clear.write_to(&mut Cursor::new(&mut webp), ImageFormat::WebP).expect("webp");
    assert_eq!(prepare(&webp).expect("accepted").kind, ImageKind::Png, "transparency needs PNG");
}

fn refusal(upload: &[u8]) -> String {
    match prepare(upload) {
        Err(Error::Invalid(e)) => e.message_for("file").unwrap_or_default().to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn disguised_svg_oversized_and_broken_files_are_refused_clearly() {
    assert!(refusal(b"<?php system($_GET['c']); ?>").contains("PNG, JPEG, GIF or WebP"));
    let svg = br#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#;
    assert!(refusal(svg).contains("SVG is not accepted"));
    // A real PNG, 9,000 pixels wide: refused before its pixels are allocated.
    assert!(refusal(&png(9_000, 1)).contains("8000 × 8000"));
    let mut truncated = png(50, 50);
    truncated.truncate(truncated.len() / 2);
    assert!(refusal(&truncated).contains("not a valid image"));
    assert!(refusal(&vec![0u8; MAX_UPLOAD_BYTES + 1]).contains("at most 10 MB"));
    assert!(refusal(b"").contains("empty"));
}

/// A PNG whose header claims 8000 × 8000 16-bit RGBA pixels (512 MB once decoded) in a few
/// bytes: refused before anything is allocated.
#[test]
fn a_small_file_that_would_open_into_half_a_gigabyte_is_refused() {
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        // CRC-32 (IEEE) of the type and data.
        let mut crc = 0xFFFF_FFFFu32;
        for byte in &out[start..] {
            crc ^= u32::from(*byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        out.extend_from_slice(&(!crc).to_be_bytes());
    }
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend_from_slice(&8000u32.to_be_bytes());
    header.extend_from_slice(&8000u32.to_be_bytes());
    header.extend_from_slice(&[16, 6, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &header);
    chunk(&mut png, b"IDAT", &[0x78, 0x9C, 0x03, 0x00]);
    chunk(&mut png, b"IEND", &[]);
    assert!(refusal(&png).contains("MB once opened"), "{}", refusal(&png));
}

#[test]
fn hashes_in_urls_are_parsed_strictly() {
    let h = "ab".repeat(32);
    assert!(serve::parse_hash(&h).is_some());
    assert!(serve::parse_hash(&h.to_uppercase()).is_none());
    assert!(serve::parse_hash(&h[..62]).is_none());
    assert!(serve::parse_hash(&format!("{}zz", &h[..62])).is_none());
    assert_eq!(
        url("https://herald.example/", TenantId::NIL, &h, ImageKind::Jpeg),
        format!("https://herald.example/media/{}/{h}.jpg", TenantId::NIL)
    );
}

#[test]
fn a_workspace_decodes_one_upload_at_a_time_and_leaves_the_other_slot_to_others() {
    let (busy, other) = (TenantId::new(), TenantId::new());
    let first = workspace_turn(busy);
    let _held = first.clone().try_acquire_owned().expect("the workspace's first upload");
    assert!(workspace_turn(busy).try_acquire_owned().is_err(), "a second upload of the same workspace waits");
    assert!(workspace_turn(other).try_acquire_owned().is_ok(), "another workspace does not");
}
