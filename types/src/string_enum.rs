//! States and choices stored as text (`status = 'sending'`) but handled as enums: the string
//! form is written once, next to the variant, and the database, JSON and forms all use it.
//!
//! The sqlx mapping is written by hand (text in, text out) rather than derived: the derive maps a
//! Rust enum to a Postgres *enum type*, and these columns are `text` with a CHECK constraint.

macro_rules! string_enum {
    (
        $(#[$doc:meta])*
        $name:ident, invalid = $invalid:literal $(, default = $default:ident)? {
            $( $(#[$vdoc:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
        pub enum $name {
            $( $(#[$vdoc])* #[serde(rename = $text)] $variant ),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stored and serialised form.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// A filter's value from a form or a query string: empty means no filter.
            pub fn parse_optional(s: &str) -> Result<Option<Self>, $crate::Invalid> {
                if s.trim().is_empty() { Ok(None) } else { s.parse().map(Some) }
            }
        }

        $(
            impl Default for $name {
                fn default() -> Self {
                    $name::$default
                }
            }
        )?

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::Invalid;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let s = s.trim();
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str().eq_ignore_ascii_case(s))
                    .ok_or_else(|| $crate::Invalid::new($invalid))
            }
        }

        #[cfg(feature = "sqlx")]
        impl sqlx::Type<sqlx::Postgres> for $name {
            fn type_info() -> sqlx::postgres::PgTypeInfo {
                <str as sqlx::Type<sqlx::Postgres>>::type_info()
            }

            fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
                <str as sqlx::Type<sqlx::Postgres>>::compatible(ty)
            }
        }

        #[cfg(feature = "sqlx")]
        impl sqlx::postgres::PgHasArrayType for $name {
            fn array_type_info() -> sqlx::postgres::PgTypeInfo {
                <&str as sqlx::postgres::PgHasArrayType>::array_type_info()
            }
        }

        #[cfg(feature = "sqlx")]
        impl<'q> sqlx::Encode<'q, sqlx::Postgres> for $name {
            fn encode_by_ref(
                &self,
                buf: &mut <sqlx::Postgres as sqlx::Database>::ArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&str as sqlx::Encode<'q, sqlx::Postgres>>::encode(self.as_str(), buf)
            }
        }

        #[cfg(feature = "sqlx")]
        impl<'r> sqlx::Decode<'r, sqlx::Postgres> for $name {
            fn decode(value: sqlx::postgres::PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
                let text = <&str as sqlx::Decode<'r, sqlx::Postgres>>::decode(value)?;
                Ok(text.parse::<$name>()?)
            }
        }
    };
}
