//! The contract between Herald's crates.
//!
//! The browser (`herald-app` built for wasm32), the server functions, the REST API and the engine
//! all speak these types, so a campaign field or a new state is declared once. Everything here is
//! plain data plus the checks that need no database: values are parsed when built (an [`Email`]
//! cannot hold a bad address, even when deserialised), states are enums, and a failed check is an
//! [`Invalid`] that names the field it is about, so forms show it beside that field.
//!
//! Optional features add the server's mappings without the browser paying for them: `sqlx`
//! (ids and states as column types, views as rows) and `utoipa` (OpenAPI schemas).

#[macro_use]
mod string_enum;

pub mod ab_test;
pub mod account;
pub mod api_key;
pub mod audit;
pub mod automation;
pub mod blocks;
pub mod brand;
pub mod campaign;
pub mod field;
pub mod html;
pub mod identity;
pub mod ids;
pub mod import;
pub mod invalid;
pub mod list;
pub mod media;
pub mod member;
pub mod message;
pub mod progress;
pub mod reader;
pub mod segment;
pub mod sending_domain;
pub mod suppression;
pub mod tag;
pub mod template;
pub mod values;
pub mod webhook;

pub use ab_test::{AbMetric, AbResults, AbTest, PickWinner, Variant, VariantResult};
pub use account::{LoginSession, TwoFactorEnrolment, TwoFactorStatus};
pub use api_key::ApiKey;
pub use audit::{ActorKind, AuditAction, AuditEntry};
pub use automation::{
    Automation, AutomationInput, AutomationReport, AutomationStatus, BranchCondition, BranchTarget, EventAccepted,
    ReaderEventInput, Reentry, RemovedStepReaders, Run, RunState, RunStep, Step, StepAction, StepInput, StepStats,
    Trigger, WaitUnit, Weekday,
};
pub use blocks::{Block, BlockDocument, CONTENT_WIDTH, Column, SocialLink};
pub use brand::{
    Brand, CampaignTemplate, CampaignTemplateInput, CampaignTemplateSummary, Colour, Font, Layout, LayoutView, Theme,
};
pub use campaign::{
    ApprovalRequest, ApprovalState, AudienceCount, BodyFormat, Campaign, CampaignFilter, CampaignInput, CampaignQuery,
    CampaignStatus, Edition, FeedItem, FeedResult, FeedSource, RecentCampaign, Recurrence, ResendInput, ScheduleInput,
    TrackingMode,
};
/// The date-time type the contract's types hold, for the web app's wasm build (which has no
/// chrono of its own).
pub use chrono;
pub use field::{Field, FieldInput, FieldKind};
pub use identity::{Identity, IdentityInput};
pub use ids::{
    ApiKeyId, AutomationId, AutomationStepId, BadId, CampaignId, CampaignTemplateId, IdentityId, ImportId, InviteId,
    ListId, MediaId, MessageId, SegmentId, TagId, TemplateId, TenantId, UserId,
};
pub use import::{Import, ImportMode, ImportStatus, ImportSummary};
pub use invalid::{FieldError, Invalid, Problems, Rejected};
pub use list::{List, ListInput, ListWithCounts, OptIn, Visibility};
pub use media::{Media, MediaLibrary};
pub use member::{Member, PendingInvite};
pub use message::{Message, MessageDetail, MessageEvent, MessageStatus, SendRequest};
pub use progress::{Failure, Progress, Report, SendStatus, SkipCount};
pub use reader::{
    BulkOutcome, BulkUpsert, ConsentEvent, Existing, ListChoice, NewReader, Reader, ReaderChange, ReaderEvent,
    ReaderInput, ReaderPage, ReaderStatus, Subscription, SubscriptionStatus,
};
pub use segment::{Definition, Segment, SegmentCount, SegmentInput};
pub use sending_domain::{DnsRecordView, SendingDomainView};
pub use suppression::{NewSuppressions, Suppression, SuppressionReason, SuppressionsAdded};
pub use tag::{MAX_TAG_CHARS, Tag, TagNames, check_tag_name};
pub use template::{RenderedMessage, Template, TemplateInput, TemplateVersion};
pub use uuid;
pub use values::{Access, Editor, Email, Forbidden, Role, Slug};
pub use webhook::{
    RotateSecret, WebhookDeliveries, WebhookDelivery, WebhookEndpoint, WebhookEndpointInput, WebhookEndpointWithSecret,
};
