//! Who may call each server function, in one table: the server checks it before the function
//! runs (`herald_server::routes::session_auth::server_fn_access`), so a function whose body
//! forgot its role check still cannot be called by a lower role, and a function missing here
//! refuses every caller (and fails the route-walk tests). Each function's own `require_role`
//! stays as a second check; the tests prove the two agree.
//!
//! Keyed by the `endpoint` of `#[server(prefix = "/rpc", endpoint = …)]`.

use herald_types::Access;

const OWN: Access = Access::Own;
const PUBLIC: Access = Access::Public;
const VIEWER_READS: Access = Access::VIEWER_READS;
const AUTHOR_READS: Access = Access::AUTHOR_READS;
const ADMIN_READS: Access = Access::ADMIN_READS;
const AUTHOR_CHANGES: Access = Access::AUTHOR_CHANGES;
const ADMIN_CHANGES: Access = Access::ADMIN_CHANGES;

/// The prefix every server function's path starts with.
pub const PREFIX: &str = "/rpc/";

pub const SERVER_FNS: &[(&str, Access)] = &[
    // auth.rs
    ("session", PUBLIC),
    ("signup", PUBLIC),
    ("login", PUBLIC),
    ("login_second_factor", PUBLIC),
    ("resend_verification", OWN),
    ("verify_email", PUBLIC),
    ("logout", OWN),
    ("switch_workspace", OWN),
    ("create_workspace", OWN),
    // pages/account/overview.rs
    ("change_password", OWN),
    ("list_sessions", OWN),
    ("end_session", OWN),
    ("end_other_sessions", OWN),
    ("delete_account", OWN),
    // pages/account/two_factor.rs
    ("two_factor_status", OWN),
    ("start_two_factor", OWN),
    ("confirm_two_factor", OWN),
    ("disable_two_factor", OWN),
    // pages/audience/fields.rs
    ("list_fields", VIEWER_READS),
    ("create_field", AUTHOR_CHANGES),
    ("update_field", AUTHOR_CHANGES),
    ("delete_field", AUTHOR_CHANGES),
    // pages/audience/import.rs
    ("get_import", VIEWER_READS),
    ("start_import", AUTHOR_CHANGES),
    ("discard_import", AUTHOR_CHANGES),
    // pages/audience/imports.rs
    ("list_imports", VIEWER_READS),
    // pages/audience/mod.rs
    ("list_lists", VIEWER_READS),
    // pages/audience/overview.rs
    ("save_list", AUTHOR_CHANGES),
    ("delete_list", AUTHOR_CHANGES),
    // pages/audience/reader.rs
    ("get_reader", VIEWER_READS),
    ("update_reader", AUTHOR_CHANGES),
    ("add_reader_tags", AUTHOR_CHANGES),
    ("remove_reader_tag", AUTHOR_CHANGES),
    ("erase_reader", ADMIN_CHANGES),
    // pages/audience/readers.rs
    ("search_readers", VIEWER_READS),
    ("add_reader", AUTHOR_CHANGES),
    ("bulk_readers", AUTHOR_CHANGES),
    // pages/audience/segment.rs
    ("segment_edit_view", VIEWER_READS),
    ("preview_segment", VIEWER_READS),
    ("save_segment", AUTHOR_CHANGES),
    // pages/audience/segments.rs
    ("list_segments", VIEWER_READS),
    ("delete_segment", AUTHOR_CHANGES),
    // pages/audience/suppressions.rs
    ("search_suppressions", VIEWER_READS),
    ("add_suppressions", AUTHOR_CHANGES),
    ("remove_suppression", ADMIN_CHANGES),
    // pages/audience/tags.rs
    ("list_tags", VIEWER_READS),
    ("rename_tag", AUTHOR_CHANGES),
    ("delete_tag", AUTHOR_CHANGES),
    // pages/automations/editor/server.rs
    ("automation_edit_view", VIEWER_READS),
    ("save_automation", AUTHOR_CHANGES),
    ("change_automation", AUTHOR_CHANGES),
    ("test_automation", AUTHOR_CHANGES),
    ("preview_automation_mail", VIEWER_READS),
    // pages/automations/list.rs
    ("list_automations", VIEWER_READS),
    // pages/campaigns/ab_results.rs
    ("pick_ab_winner", AUTHOR_CHANGES),
    // pages/campaigns/approval.rs
    ("approve_send", ADMIN_CHANGES),
    ("reject_send", ADMIN_CHANGES),
    // pages/campaigns/editor.rs
    ("get_campaign", VIEWER_READS),
    ("campaign_state", VIEWER_READS),
    ("save_campaign", AUTHOR_CHANGES),
    ("campaign_audience", VIEWER_READS),
    // pages/campaigns/fields.rs
    ("blocks_to_html", AUTHOR_READS),
    // pages/campaigns/list.rs
    ("list_campaigns", VIEWER_READS),
    ("create_campaign", AUTHOR_CHANGES),
    // pages/campaigns/preview.rs
    ("preview_campaign", VIEWER_READS),
    ("find_reader", VIEWER_READS),
    ("test_send_campaign", AUTHOR_CHANGES),
    // pages/campaigns/progress.rs
    ("campaign_report", VIEWER_READS),
    ("pause_campaign", AUTHOR_CHANGES),
    ("resume_campaign", AUTHOR_CHANGES),
    ("cancel_campaign", AUTHOR_CHANGES),
    ("retry_failed_sends", AUTHOR_CHANGES),
    // pages/campaigns/repeat.rs
    ("load_recurring", VIEWER_READS),
    ("stop_recurring", AUTHOR_CHANGES),
    // pages/campaigns/resend.rs
    ("resend_to_non_openers", AUTHOR_CHANGES),
    ("duplicate_campaign", AUTHOR_CHANGES),
    // pages/campaigns/send_panel.rs
    ("send_campaign", AUTHOR_CHANGES),
    ("schedule_campaign", AUTHOR_CHANGES),
    ("unschedule_campaign", AUTHOR_CHANGES),
    ("delete_campaign", AUTHOR_CHANGES),
    // pages/campaigns/stats.rs
    ("campaign_stats", VIEWER_READS),
    // pages/campaigns/templates.rs
    ("campaign_templates", VIEWER_READS),
    ("start_campaign", AUTHOR_CHANGES),
    ("save_campaign_template", AUTHOR_CHANGES),
    ("delete_campaign_template", AUTHOR_CHANGES),
    // pages/dashboard.rs
    ("dashboard_summary", VIEWER_READS),
    // pages/forgot_password.rs
    ("request_password_reset", PUBLIC),
    // pages/invite.rs
    ("get_invite", PUBLIC),
    ("accept_invite", OWN),
    // pages/media.rs
    ("list_media", VIEWER_READS),
    ("delete_media", AUTHOR_CHANGES),
    // pages/reset_password.rs
    ("reset_password", PUBLIC),
    // pages/settings/api_keys.rs
    ("list_api_keys", ADMIN_READS),
    ("create_api_key", ADMIN_CHANGES),
    ("revoke_api_key", ADMIN_CHANGES),
    // pages/settings/audit.rs
    ("audit_log", ADMIN_READS),
    // pages/settings/webhook_endpoints.rs: endpoints receive readers' addresses.
    ("list_webhook_endpoints", ADMIN_READS),
    ("create_webhook_endpoint", ADMIN_CHANGES),
    ("load_webhook_endpoint", ADMIN_READS),
    ("send_webhook_test", ADMIN_CHANGES),
    ("redeliver_webhook", ADMIN_CHANGES),
    ("set_webhook_enabled", ADMIN_CHANGES),
    ("rotate_webhook_secret", ADMIN_CHANGES),
    ("delete_webhook_endpoint", ADMIN_CHANGES),
    // pages/settings/brand.rs
    ("get_brand", VIEWER_READS),
    ("update_brand", AUTHOR_CHANGES),
    ("brand_preview", VIEWER_READS),
    // pages/settings/domains.rs
    ("list_sending_domains", VIEWER_READS),
    ("add_sending_domain", ADMIN_CHANGES),
    ("check_sending_domain", ADMIN_CHANGES),
    ("delete_sending_domain", ADMIN_CHANGES),
    // pages/settings/general.rs
    ("workspace_settings", VIEWER_READS),
    ("update_workspace_settings", ADMIN_CHANGES),
    // pages/settings/members.rs
    ("list_members", VIEWER_READS),
    ("save_team_rules", ADMIN_CHANGES),
    ("invite_member", ADMIN_CHANGES),
    ("change_member_role", ADMIN_CHANGES),
    ("remove_member", ADMIN_CHANGES),
    ("leave_workspace", OWN),
    ("revoke_invite", ADMIN_CHANGES),
    // pages/settings/mod.rs
    ("list_identities", VIEWER_READS),
    // pages/settings/sending.rs
    ("sending_policy", VIEWER_READS),
    ("save_sending_policy", ADMIN_CHANGES),
    ("save_identity", ADMIN_CHANGES),
    ("delete_identity", ADMIN_CHANGES),
    ("test_identity", AUTHOR_CHANGES),
    // pages/settings/webhooks.rs
    ("list_webhooks", VIEWER_READS),
    ("rotate_webhook", ADMIN_CHANGES),
    ("save_webhook", ADMIN_CHANGES),
    // pages/signup_finish.rs
    ("read_signup_link", PUBLIC),
    ("finish_signup", PUBLIC),
    // pages/transactional/message.rs
    ("load_message", VIEWER_READS),
    ("cancel_message", AUTHOR_CHANGES),
    // pages/transactional/overview.rs
    ("list_messages", VIEWER_READS),
    ("transactional_settings", VIEWER_READS),
    ("resume_transactional", ADMIN_CHANGES),
    ("save_transactional_settings", ADMIN_CHANGES),
    // pages/transactional/template.rs
    ("tx_template_view", VIEWER_READS),
    ("preview_tx_template", VIEWER_READS),
    ("save_tx_template", AUTHOR_CHANGES),
    // pages/transactional/templates.rs
    ("list_tx_templates", VIEWER_READS),
];

/// The declared access of the server function at `path` (`/rpc/<endpoint>`), if any.
pub fn of_path(path: &str) -> Option<Access> {
    let endpoint = path.strip_prefix(PREFIX)?;
    SERVER_FNS.iter().find(|(name, _)| *name == endpoint).map(|(_, access)| *access)
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_server_function_is_declared_once() {
        let mut names: Vec<&str> = super::SERVER_FNS.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "an endpoint is declared twice");
    }
}
