//! A choice of one of the workspace's tags: the trigger's, a tag step's and a branch's.

use herald_types::TagId;
use leptos::prelude::*;

#[component]
pub(super) fn TagSelect(
    id: String,
    tags: StoredValue<Vec<(TagId, String)>>,
    selected: TagId,
    disabled: bool,
    on_pick: Callback<TagId>,
) -> impl IntoView {
    let empty = tags.with_value(Vec::is_empty);
    view! {
        <select id=id class="input" disabled=disabled
            on:change=move |ev| on_pick.run(event_target_value(&ev).parse().unwrap_or(TagId::NIL))>
            {empty.then(|| view! { <option value="">"No tags yet: add one on Audience → Tags"</option> })}
            {tags.with_value(|t| t.iter().map(|(tid, n)| view! {
                <option value=tid.to_string() selected=*tid == selected>{n.clone()}</option>
            }).collect_view())}
        </select>
    }
}
