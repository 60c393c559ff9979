//! The recurring side of `/campaigns/:id`: the editor's "Repeat" section (schedule and
//! per-reader data) and, once the schedule runs, the recurring campaign's own view: when the
//! next edition goes, how many readers have data waiting, and every edition with its figures.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::ui::{ActionError, Card, LoadError, LocalTimeOf, PageHeader};
use crate::error::AppError;
use herald_types::{Campaign, CampaignId, Edition, FeedSource, Invalid, Recurrence};

/// The editor's signals for this section (strings as typed; [`RepeatForm::recurrence`] parses).
#[derive(Clone, Copy)]
pub struct RepeatForm {
    /// Empty: a one-off campaign. Else `day`, `week` or `month`.
    pub every: RwSignal<String>,
    pub weekdays: RwSignal<Vec<u8>>,
    pub month_day: RwSignal<String>,
    pub time: RwSignal<String>,
    pub tz: RwSignal<String>,
    pub feed: RwSignal<FeedSource>,
    pub feed_url: RwSignal<String>,
}

impl RepeatForm {
    pub fn new(c: &Campaign, browser_tz: &str) -> Self {
        let r = c.recurrence.clone().unwrap_or_default();
        Self {
            every: RwSignal::new(r.every),
            weekdays: RwSignal::new(if r.weekdays.is_empty() { vec![3] } else { r.weekdays }),
            month_day: RwSignal::new(r.month_day.unwrap_or(1).to_string()),
            time: RwSignal::new(if r.time.is_empty() { "13:00".into() } else { r.time }),
            tz: RwSignal::new(if r.tz.is_empty() { browser_tz.to_string() } else { r.tz }),
            feed: RwSignal::new(c.feed),
            feed_url: RwSignal::new(c.feed_url.clone()),
        }
    }

    /// The schedule (`None`: a one-off), or what to fix in this section.
    pub fn recurrence(&self) -> Result<Option<Recurrence>, Invalid> {
        let every = self.every.get_untracked();
        if every.is_empty() {
            return Ok(None);
        }
        let month_day = match self.month_day.get_untracked().trim() {
            "" => None,
            d => Some(
                d.parse::<u8>()
                    .map_err(|_| Invalid::field("recurrence", "Choose a day of the month between 1 and 28."))?,
            ),
        };
        let tz = self.tz.get_untracked();
        let r = Recurrence {
            every,
            weekdays: self.weekdays.get_untracked(),
            month_day,
            time: self.time.get_untracked().trim().to_string(),
            tz: if tz.trim().is_empty() { "UTC".into() } else { tz.trim().to_string() },
        };
        r.validate()?;
        Ok(Some(r))
    }

    /// Per-reader data only for a recurring campaign.
    pub fn feed(&self) -> FeedSource {
        if self.every.get_untracked().is_empty() { FeedSource::None } else { self.feed.get_untracked() }
    }
}

const DAYS: [(u8, &str); 7] = [(1, "Mon"), (2, "Tue"), (3, "Wed"), (4, "Thu"), (5, "Fri"), (6, "Sat"), (7, "Sun")];

/// The editor's "Repeat" card. `changed` restarts the autosave countdown; `error` is the
/// section's message from the last save.
#[component]
pub fn RepeatFields(
    form: RepeatForm,
    changed: Callback<()>,
    error: impl Fn() -> Option<String> + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let on = move || !form.every.get().is_empty();
    let set = move |s: RwSignal<String>| {
        move |ev: leptos::ev::Event| {
            s.set(event_target_value(&ev));
            changed.run(());
        }
    };
    view! {
        <Card title="Repeat">
            <div class="flex flex-wrap items-center gap-2 text-sm">
                <label for="campaign-repeat" class="font-medium text-slate-700">"Send"</label>
                <select id="campaign-repeat" class="input w-56" on:change=set(form.every) data-testid="campaign-repeat">
                    {[("", "Once"), ("day", "Every day"), ("week", "Every week"), ("month", "Every month")].into_iter().map(|(v, l)| view! {
                        <option value=v selected=form.every.get_untracked() == v>{l}</option>
                    }).collect_view()}
                </select>
                <Show when=move || form.every.get() == "week">
                    <span class="text-slate-500">"on"</span>
                    {DAYS.into_iter().map(|(d, label)| view! {
                        <label class="flex items-center gap-1">
                            <input type="checkbox" checked=form.weekdays.get_untracked().contains(&d)
                                on:change=move |ev| {
                                    let yes = event_target_checked(&ev);
                                    form.weekdays.update(|w| { w.retain(|x| *x != d); if yes { w.push(d); w.sort(); } });
                                    changed.run(());
                                }/>{label}
                        </label>
                    }).collect_view()}
                </Show>
                <Show when=move || form.every.get() == "month">
                    <span class="text-slate-500">"on day"</span>
                    <input type="number" min="1" max="28" class="input w-20" aria-label="Day of the month"
                        value=form.month_day.get_untracked() on:input=set(form.month_day)/>
                </Show>
                <Show when=on>
                    <span class="text-slate-500">"at"</span>
                    <input type="time" class="input w-32" aria-label="Time of day" value=form.time.get_untracked() on:input=set(form.time)/>
                    <input class="input w-48" aria-label="Time zone" placeholder="Europe/Berlin"
                        value=form.tz.get_untracked() on:input=set(form.tz)/>
                </Show>
            </div>
            <Show when=on>
                <div class="mt-4 text-sm">
                    <label for="campaign-feed" class="font-medium text-slate-700">"Per-reader data"</label>
                    <select id="campaign-feed" class="input mt-1 w-80" on:change=move |ev| {
                        form.feed.set(event_target_value(&ev).parse().unwrap_or_default());
                        changed.run(());
                    }>
                        {[(FeedSource::None, "None: everyone gets the template"), (FeedSource::Api, "Pushed through the API before each edition"),
                          (FeedSource::Url, "Fetched from a URL per reader")].into_iter().map(|(v, l)| view! {
                            <option value=v.as_str() selected=form.feed.get_untracked() == v>{l}</option>
                        }).collect_view()}
                    </select>
                    <Show when=move || form.feed.get() == FeedSource::Api>
                        <p class="mt-1 text-xs text-slate-500">
                            <code class="rounded bg-slate-100 px-1">"PUT /api/v1/campaigns/{id}/feed/{reader}"</code>
                            " (or the bulk " <code class="rounded bg-slate-100 px-1">"PUT …/feed"</code>") with a JSON object; the template reads it as "
                            <code class="rounded bg-slate-100 px-1">"{{ feed.… }}"</code>". Readers without data for an edition are skipped and counted."
                        </p>
                    </Show>
                    <Show when=move || form.feed.get() == FeedSource::Url>
                        <input class="input mt-2 font-mono text-xs" placeholder="https://app.example.com/digest?email={email}"
                            aria-label="Feed URL" value=form.feed_url.get_untracked() on:input=set(form.feed_url)/>
                        <p class="mt-1 text-xs text-slate-500">"Fetched per reader while sending, 8 at a time, 10 s timeout. A 404, 204, null or {} skips the reader; other failures are retried."</p>
                    </Show>
                </div>
                <p class="mt-3 text-xs text-slate-500">"Each edition is its own send with its own report. If Herald was down at a slot, one late edition goes out when it is back, not one per missed slot. “Spread the send” above paces each edition."</p>
            </Show>
            <p class="mt-1 text-xs text-red-600" role="alert">{error}</p>
        </Card>
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecurringView {
    pub schedule: String,
    pub feed: FeedSource,
    pub pending_feed: i64,
    pub editions: Vec<Edition>,
}

#[server(prefix = "/rpc", endpoint = "load_recurring")]
pub async fn load_recurring(id: CampaignId) -> Result<RecurringView, AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::campaigns::{recurring, store};
    let m = require_role(Role::Viewer).await?;
    let c = store::get(&m.state.db, m.tenant, id).await?;
    let schedule = c.recurrence.as_ref().map(Recurrence::describe).unwrap_or_default();
    let editions = recurring::editions(&m.state.db, m.tenant, id).await?;
    Ok(RecurringView {
        schedule,
        pending_feed: recurring::pending_feed(&m.state.db, m.tenant, id).await?,
        feed: c.feed,
        editions,
    })
}

#[server(prefix = "/rpc", endpoint = "stop_recurring")]
pub async fn stop_recurring(id: CampaignId) -> Result<(), AppError> {
    use crate::ssr::require_role;
    use herald_engine::Role;
    use herald_engine::campaigns::recurring;
    let m = require_role(Role::Author).await?;
    recurring::stop(&m.state.db, m.tenant, m.role, id).await?;
    m.audit(herald_engine::audit::Action::CampaignStopped, id, serde_json::json!({})).await;
    Ok(())
}

/// A running recurring campaign: its schedule, its editions, and a way to stop it.
#[component]
pub fn RecurringCampaign(
    id: CampaignId,
    name: String,
    refresh: RwSignal<u32>,
    data: Resource<Result<RecurringView, AppError>>,
) -> impl IntoView {
    let stop = ServerAction::<StopRecurring>::new();
    Effect::new(move |_| {
        if stop.value().get().is_some_and(|r| r.is_ok()) {
            refresh.update(|n| *n += 1);
        }
    });
    view! {
        <PageHeader title=name subtitle="Recurring campaign"/>
        <Suspense fallback=|| view! { <p class="text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) => view! {
                        <Card>
                            <p class="text-sm" data-testid="recurring-schedule"><span class="badge">"Running"</span>" " {v.schedule.clone()}</p>
                            {(v.feed == FeedSource::Api).then(|| view! {
                                <p class="mt-2 text-sm text-slate-600">{format!("{} readers have data waiting for the next edition.", v.pending_feed)}</p>
                            })}
                        </Card>
                        <Card title="Editions">
                            {if v.editions.is_empty() {
                                view! { <p class="text-sm text-slate-500">"The first edition goes out at the next slot."</p> }.into_any()
                            } else {
                                view! {
                                    <table class="w-full text-left text-sm" data-testid="editions-table">
                                        <thead class="text-xs uppercase text-slate-500"><tr><th class="py-2">"Slot"</th><th>"Status"</th><th>"Sent"</th><th>"No data"</th><th>"Failed"</th></tr></thead>
                                        <tbody class="divide-y divide-slate-100">
                                            {v.editions.into_iter().map(|e| view! {
                                                <tr><td class="py-2"><a class="text-indigo-600 hover:underline" href=format!("/campaigns/{}", e.id)><LocalTimeOf at=e.slot/></a></td>
                                                    <td><span class="badge">{e.status.label()}</span></td><td>{e.sent}</td><td>{e.skipped_no_data}</td><td>{e.failed}</td></tr>
                                            }).collect_view()}
                                        </tbody>
                                    </table>
                                }.into_any()
                            }}
                        </Card>
                    }.into_any(),
                    Err(e) => view! { <LoadError error=e/> }.into_any(),
                }
            })}
        </Suspense>
        <ActionForm action=stop>
            <input type="hidden" name="id" value=id.to_string()/>
            <button type="submit" class="btn-secondary">"Stop the schedule"</button>
        </ActionForm>
        <p class="mt-1 text-xs text-slate-500">"Stopping makes it a draft again; editions already sending finish."</p>
        <ActionError value=stop.value()/>
    }
}
