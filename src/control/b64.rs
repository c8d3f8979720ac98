//! Base64 on the wire: standard alphabet, padded (RFC 4648), the one codec for
//! bytes carried in JSON (file contents of `show`, captured output of `exec`).
//! Decoding is strict (no whitespace, canonical padding) and never panics.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// Encode `data`.
pub fn b64_encode(data: &[u8]) -> String {
    STANDARD.encode(data)
}

/// Decode `s`; `None` if it is not well-formed padded base64.
pub fn b64_decode(s: &str) -> Option<Vec<u8>> {
    STANDARD.decode(s).ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn rfc4648_vectors_and_garbage() {
        for (raw, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(b64_encode(raw.as_bytes()), enc);
            assert_eq!(b64_decode(enc).unwrap(), raw.as_bytes());
        }
        assert_eq!(b64_encode(&[0xff, 0xfe, 0xfd]), "//79");
        for bad in ["Zg=", "Z===", "Zg==Zg==", "Zm9*", "=Zm9", "é123"] {
            assert!(b64_decode(bad).is_none(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn round_trips(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            prop_assert_eq!(b64_decode(&b64_encode(&data)).unwrap(), data);
        }
    }
}
