//! The block editor: a mail's body built from blocks (heading, paragraph, image,
//! button, columns…) instead of written as Markdown or HTML — a campaign's, or an automation
//! mail step's (the one editor for both). It edits a [`herald_types::BlockDocument`] and writes
//! it, as JSON, into its [`BlockBody`]'s `body` after every change, so the campaign editor's
//! autosave, preview and test send work unchanged.
//!
//! Blocks are reordered by dragging their handle (pointer events, so touch works too) or, with the keyboard, by
//! Alt+↑/↓ anywhere inside a block. Undo and redo keep whole-document snapshots: one before each
//! add, move, duplicate or delete, and one each time a field is entered, so typing in a field
//! undoes as one step.
//!
//! Inputs are uncontrolled (their first value is set, then the browser owns it): a block's view
//! is built once per block and kept across reorders by its key, and undo rebuilds every block.

use leptos::html;
use leptos::prelude::*;

use crate::components::upload::{LibraryPicker, UploadList, UploadState, drags_files, upload_chosen, upload_dropped};
use herald_types::blocks::{BLOCK_KINDS, CONTENT_WIDTH, CURRENT_VERSION};
use herald_types::{Block, BlockDocument, Column, FieldError, Font, Media, SocialLink, Theme};

/// What the block editor edits: a body kept as JSON in a signal, wherever it belongs (a
/// campaign's form, an automation's mail step), and the problems found in it.
#[derive(Clone, Copy)]
pub struct BlockBody {
    /// The document as JSON, written after every change.
    pub body: RwSignal<String>,
    /// Called after every change (the campaign editor's autosave countdown).
    pub changed: Callback<()>,
    /// The last save's problems, keyed as a campaign's are (`body`, `body.blocks.2.text`).
    pub errors: Signal<Vec<FieldError>>,
    /// The template error the preview ran into, keyed the same way.
    pub render_error: Signal<Option<FieldError>>,
    /// Starts every element id, so that two editors can share a page.
    pub ids: StoredValue<String>,
}

/// A block in the editor: a key that survives reordering (so its inputs keep their DOM nodes)
/// and its content.
#[derive(Clone, Copy)]
struct Entry {
    key: u64,
    block: RwSignal<Block>,
}

/// The document being edited and its history.
#[derive(Clone, Copy)]
struct Doc {
    entries: RwSignal<Vec<Entry>>,
    next_key: StoredValue<u64>,
    undo: StoredValue<Vec<Vec<Block>>>,
    redo: StoredValue<Vec<Vec<Block>>>,
    /// How many steps each stack holds, for the buttons.
    history: RwSignal<(usize, usize)>,
    /// The block being dragged, and the one under the pointer.
    dragging: RwSignal<Option<u64>>,
    drop_target: RwSignal<Option<u64>>,
    /// Colours and font (not part of undo: the style panel sets them directly).
    theme: RwSignal<Theme>,
    source: BlockBody,
}

impl Doc {
    fn new(source: BlockBody, document: BlockDocument) -> Self {
        let doc = Doc {
            entries: RwSignal::new(Vec::new()),
            next_key: StoredValue::new(0),
            undo: StoredValue::new(Vec::new()),
            redo: StoredValue::new(Vec::new()),
            history: RwSignal::new((0, 0)),
            dragging: RwSignal::new(None),
            drop_target: RwSignal::new(None),
            theme: RwSignal::new(document.theme),
            source,
        };
        let entries = document.blocks.into_iter().map(|b| doc.entry(b)).collect();
        doc.entries.set(entries);
        doc
    }

    fn entry(&self, block: Block) -> Entry {
        let key = self.next_key.get_value();
        self.next_key.set_value(key + 1);
        Entry { key, block: RwSignal::new(block) }
    }

    fn blocks(&self) -> Vec<Block> {
        self.entries.with_untracked(|e| e.iter().map(|x| x.block.get_untracked()).collect())
    }

    /// An element id of this editor's: `name` after the editor's prefix.
    fn id(&self, name: &str) -> String {
        format!("{}{name}", self.source.ids.get_value())
    }

    /// Writes the document into its body and says so (the autosave countdown starts).
    fn save(&self) {
        let doc = BlockDocument { version: CURRENT_VERSION, theme: self.theme.get_untracked(), blocks: self.blocks() };
        self.source.body.set(doc.to_json());
        self.source.changed.run(());
        self.history.set((self.undo.with_value(Vec::len), self.redo.with_value(Vec::len)));
    }

    /// A field changed: the redo steps no longer apply.
    fn changed(&self) {
        self.redo.set_value(Vec::new());
        self.save();
    }

    /// Remembers the document as it is now, unless that is already the last step.
    fn checkpoint(&self) {
        let now = self.blocks();
        if self.undo.with_value(|u| u.last() != Some(&now)) {
            self.undo.update_value(|u| u.push(now));
            self.history.set((self.undo.with_value(Vec::len), self.redo.with_value(Vec::len)));
        }
    }

    /// A structural change (add, move, duplicate, delete), undoable as one step.
    fn edit(&self, change: impl FnOnce(&mut Vec<Entry>)) {
        self.checkpoint();
        self.entries.update(change);
        self.changed();
    }

    fn restore(&self, blocks: Vec<Block>) {
        let entries = blocks.into_iter().map(|b| self.entry(b)).collect();
        self.entries.set(entries);
        self.save();
    }

    fn undo(&self) {
        let now = self.blocks();
        let mut stack = self.undo.get_value();
        while let Some(previous) = stack.pop() {
            if previous != now {
                self.undo.set_value(stack);
                self.redo.update_value(|r| r.push(now));
                self.restore(previous);
                return;
            }
        }
        self.undo.set_value(stack);
        self.save();
    }

    fn redo(&self) {
        let Some(next) = self.redo.try_update_value(Vec::pop).flatten() else { return };
        let now = self.blocks();
        self.undo.update_value(|u| u.push(now));
        self.restore(next);
    }

    fn position(&self, key: u64) -> Option<usize> {
        self.entries.with(|e| e.iter().position(|x| x.key == key))
    }

    fn position_untracked(&self, key: u64) -> Option<usize> {
        self.entries.with_untracked(|e| e.iter().position(|x| x.key == key))
    }

    fn move_to(&self, key: u64, to: usize) {
        let Some(from) = self.entries.with_untracked(|e| e.iter().position(|x| x.key == key)) else { return };
        if from == to {
            return;
        }
        self.edit(|e| {
            let entry = e.remove(from);
            e.insert(to.min(e.len()), entry);
        });
    }

    fn move_by(&self, key: u64, up: bool) {
        let Some(from) = self.entries.with_untracked(|e| e.iter().position(|x| x.key == key)) else { return };
        let len = self.entries.with_untracked(Vec::len);
        match up {
            true if from > 0 => self.move_to(key, from - 1),
            false if from + 1 < len => self.move_to(key, from + 1),
            _ => {}
        }
    }

    fn duplicate(&self, key: u64) {
        let Some(at) = self.entries.with_untracked(|e| e.iter().position(|x| x.key == key)) else { return };
        let copy = self.entry(self.entries.with_untracked(|e| e[at].block.get_untracked()));
        self.edit(|e| e.insert(at + 1, copy));
    }

    fn remove(&self, key: u64) {
        self.edit(|e| e.retain(|x| x.key != key));
    }

    /// Adds a block at the end, above the footer when there is one.
    fn add(&self, block: Block) -> u64 {
        let is_footer = matches!(block, Block::Footer { .. });
        let entry = self.entry(block);
        self.edit(|e| {
            let footer_last = e.last().is_some_and(|x| x.block.with_untracked(|b| matches!(b, Block::Footer { .. })));
            let at = if footer_last && !is_footer { e.len() - 1 } else { e.len() };
            e.insert(at, entry);
        });
        entry.key
    }
}

/// Focuses the element with `id` once the DOM has caught up (after a move or an add).
fn focus_soon(id: String) {
    request_animation_frame(move || {
        use leptos::wasm_bindgen::JsCast;
        if let Some(el) =
            document().get_element_by_id(&id).and_then(|e| e.dyn_into::<leptos::web_sys::HtmlElement>().ok())
        {
            let _ = el.focus();
        }
    });
}

fn handle_id(doc: Doc, key: u64) -> String {
    doc.id(&format!("block-{key}-handle"))
}

#[component]
pub fn BlockEditor(source: BlockBody) -> impl IntoView {
    let parsed = BlockDocument::parse(&source.body.get_untracked());
    let problem = parsed.as_ref().err().map(ToString::to_string);
    let doc =
        Doc::new(source, parsed.unwrap_or_else(|_| BlockDocument { blocks: Vec::new(), ..BlockDocument::default() }));
    let kind = RwSignal::new("paragraph".to_string());
    let (undo_steps, redo_steps) = (move || doc.history.get().0, move || doc.history.get().1);
    let errors = source.errors;
    let body_error =
        move || errors.with(|e| e.iter().find(|e| e.field.as_deref() == Some("body")).map(|e| e.message.clone()));
    // Image files dropped anywhere on the editor are uploaded, each becoming an image block.
    let uploads = RwSignal::new(Vec::<UploadState>::new());
    let uploaded = Callback::new(move |m: Media| {
        let width = u32::try_from(m.width).unwrap_or(CONTENT_WIDTH).min(CONTENT_WIDTH);
        let key = doc.add(Block::Image { src: m.url, alt: String::new(), href: String::new(), width });
        focus_soon(doc.id(&format!("block-{key}-alt")));
    });
    view! {
        <div data-testid="block-editor" on:focusin=move |_| doc.checkpoint()
            on:dragover=move |ev| if drags_files(&ev) { ev.prevent_default(); }
            on:drop=move |ev| {
                if drags_files(&ev) {
                    ev.prevent_default();
                    upload_dropped(&ev, uploads, uploaded);
                }
            }>
            {problem.map(|p| view! {
                <p class="mb-3 rounded-md bg-red-50 px-3 py-2 text-sm text-red-700" role="alert">{p}</p>
            })}
            <div class="mb-3 flex items-center gap-2">
                <button type="button" class="btn-secondary" on:click=move |_| doc.undo()
                    disabled=move || undo_steps() == 0>"Undo"</button>
                <button type="button" class="btn-secondary" on:click=move |_| doc.redo()
                    disabled=move || redo_steps() == 0>"Redo"</button>
                <p class="ml-auto text-xs text-slate-500">"Drag a block by its handle, or press Alt+↑/↓ inside it."</p>
            </div>
            <p id=doc.id("body-error") class="mb-2 text-xs text-red-600" role="alert">{body_error}</p>
            <ol class="space-y-3" aria-label="Blocks">
                <For each=move || doc.entries.get() key=|e| e.key let:entry>
                    <BlockCard doc=doc entry=entry/>
                </For>
            </ol>
            {move || doc.entries.with(Vec::is_empty).then(|| view! {
                <p class="rounded-lg border border-dashed border-slate-300 px-4 py-6 text-center text-sm text-slate-500">
                    "No blocks yet. Add a heading or a paragraph to start."
                </p>
            })}
            <div class="mt-4 flex items-end gap-2">
                <div class="min-w-0 flex-1 sm:max-w-xs">
                    <label for=doc.id("block-kind") class="label">"Add a block"</label>
                    <select id=doc.id("block-kind") class="input" on:change=move |ev| kind.set(event_target_value(&ev))>
                        {BLOCK_KINDS.iter().map(|(value, label)| view! {
                            <option value=*value selected=*value == "paragraph">{*label}</option>
                        }).collect_view()}
                    </select>
                </div>
                <button type="button" class="btn-secondary" on:click=move |_| {
                    if let Some(block) = Block::new(&kind.get_untracked()) {
                        focus_soon(handle_id(doc, doc.add(block)));
                    }
                }>"Add block"</button>
            </div>
            <p class="mt-2 text-xs text-slate-500">"Drop image files here to upload them as image blocks."</p>
            <UploadList states=uploads/>
            <StylePanel doc=doc/>
        </div>
    }
}

/// The document's colours and font, and a way back to the workspace's brand.
#[component]
fn StylePanel(doc: Doc) -> impl IntoView {
    let set = move |change: Box<dyn FnOnce(&mut Theme)>| {
        doc.theme.update(|t| change(t));
        doc.changed();
    };
    let colour = move |id: &'static str,
                       label: &'static str,
                       get: fn(&Theme) -> String,
                       put: fn(&mut Theme, herald_types::Colour)| {
        view! {
            <div>
                <label for=doc.id(id) class="label">{label}</label>
                <input id=doc.id(id) type="color" class="h-11 w-full min-w-[120px] cursor-pointer rounded-md border border-slate-300 bg-white p-1"
                    prop:value=move || doc.theme.with(get)
                    on:input=move |ev| {
                        if let Ok(c) = herald_types::Colour::parse(&event_target_value(&ev)) {
                            set(Box::new(move |t| put(t, c)));
                        }
                    }/>
            </div>
        }
    };
    let use_brand = Action::new(|_: &()| crate::pages::settings::brand::get_brand());
    Effect::new(move |_| {
        if let Some(Ok(view)) = use_brand.value().get() {
            doc.theme.set(view.brand.theme);
            doc.changed();
        }
    });
    view! {
        <details class="mt-6 rounded-lg border border-slate-200 bg-white" data-testid="block-style">
            <summary class="cursor-pointer px-4 py-3 text-sm font-medium text-slate-700">"Style: colours and font"</summary>
            <div class="grid grid-cols-1 gap-3 px-4 pb-4 sm:grid-cols-2 lg:grid-cols-4">
                {colour("style-accent", "Links and buttons", |t| t.accent.to_string(), |t, c| t.accent = c)}
                {colour("style-background", "Background", |t| t.background.to_string(), |t, c| t.background = c)}
                {colour("style-text", "Text", |t| t.text.to_string(), |t, c| t.text = c)}
                <div>
                    <label for=doc.id("style-font") class="label">"Font"</label>
                    <select id=doc.id("style-font") class="input" on:change=move |ev| {
                        if let Ok(font) = event_target_value(&ev).parse::<Font>() {
                            set(Box::new(move |t| t.font = font));
                        }
                    }>
                        {Font::ALL.iter().map(|f| view! {
                            <option value=f.as_str() selected=move || doc.theme.with(|t| t.font == *f)>{f.label()}</option>
                        }).collect_view()}
                    </select>
                </div>
            </div>
            <div class="flex flex-wrap items-center gap-3 px-4 pb-4">
                <button type="button" class="btn-secondary" on:click=move |_| { use_brand.dispatch(()); }
                    disabled=move || use_brand.pending().get()>"Use the workspace’s brand colours"</button>
                <a href="/settings/brand" class="text-sm text-indigo-600 hover:underline">"Edit the brand"</a>
            </div>
        </details>
    }
}

#[component]
fn BlockCard(doc: Doc, entry: Entry) -> impl IntoView {
    let key = entry.key;
    let index = Memo::new(move |_| doc.position(key).unwrap_or(0));
    let last = Memo::new(move |_| doc.entries.with(Vec::len).saturating_sub(1));
    let label = entry.block.with_untracked(Block::label);
    let kind = entry.block.with_untracked(kind_of);
    let drop_here = move || doc.drop_target.get() == Some(key);
    let handle = NodeRef::<html::Div>::new();
    let path = Signal::derive(move || format!("body.blocks.{}", index.get()));
    let moved = move |up: bool| {
        doc.move_by(key, up);
        focus_soon(handle_id(doc, key));
    };
    view! {
        <li data-testid="block" data-kind=kind
            data-template-error=move || holds_render_error(doc, &path.get()).then_some("true")
            class=move || if drop_here() {
                "rounded-lg border-2 border-indigo-400 bg-white"
            } else if holds_render_error(doc, &path.get()) {
                "rounded-lg border-2 border-red-400 bg-white"
            } else {
                "rounded-lg border border-slate-200 bg-white"
            }
            on:keydown=move |ev| {
                if ev.alt_key() && (ev.key() == "ArrowUp" || ev.key() == "ArrowDown") {
                    ev.prevent_default();
                    moved(ev.key() == "ArrowUp");
                }
            }
            data-block-key=key.to_string()>
            <div class="flex flex-wrap items-center gap-1 border-b border-slate-100 px-1 py-1">
                // Dragged with pointer events (mouse, pen and touch alike; HTML drag and drop
                // does not work on phones): the handle captures the pointer, the block under it
                // is the drop target, releasing moves the block there.
                <div id=handle_id(doc, key) node_ref=handle role="button" tabindex="0"
                    class="inline-flex h-11 w-11 cursor-grab touch-none items-center justify-center rounded-md text-lg text-slate-500 select-none hover:bg-slate-100 active:cursor-grabbing"
                    aria-label=format!("Move the {} block: drag it, or press Alt+Up or Alt+Down", label.to_lowercase())
                    title="Drag to move (or Alt+↑/↓)"
                    on:pointerdown=move |ev| {
                        if ev.button() != 0 {
                            return;
                        }
                        ev.prevent_default();
                        if let Some(el) = handle.get_untracked() {
                            let _ = el.set_pointer_capture(ev.pointer_id());
                        }
                        doc.dragging.set(Some(key));
                    }
                    on:pointermove=move |ev| {
                        if doc.dragging.get_untracked() == Some(key) {
                            doc.drop_target.set(block_under(ev.client_x(), ev.client_y()).filter(|k| *k != key));
                        }
                    }
                    on:pointerup=move |ev| {
                        if doc.dragging.get_untracked() != Some(key) {
                            return;
                        }
                        let target = block_under(ev.client_x(), ev.client_y());
                        doc.dragging.set(None);
                        doc.drop_target.set(None);
                        if let Some(to) = target.filter(|k| *k != key).and_then(|k| doc.position_untracked(k)) {
                            doc.move_to(key, to);
                        }
                    }
                    on:pointercancel=move |_| {
                        doc.dragging.set(None);
                        doc.drop_target.set(None);
                    }>
                    <span aria-hidden="true">"⠿"</span>
                </div>
                <span class="text-xs font-semibold tracking-wide text-slate-500 uppercase">{label}</span>
                // One group: on a phone it moves to its own line whole, never leaving "Delete"
                // alone on one.
                <div class="ml-auto flex items-center gap-1">
                <button type="button" class="inline-flex h-11 w-11 items-center justify-center rounded-md text-slate-600 hover:bg-slate-100 disabled:opacity-40"
                    aria-label=format!("Move the {} block up", label.to_lowercase())
                    disabled=move || index.get() == 0 on:click=move |_| moved(true)>"↑"</button>
                <button type="button" class="inline-flex h-11 w-11 items-center justify-center rounded-md text-slate-600 hover:bg-slate-100 disabled:opacity-40"
                    aria-label=format!("Move the {} block down", label.to_lowercase())
                    disabled=move || { index.get() >= last.get() } on:click=move |_| moved(false)>"↓"</button>
                <button type="button" class="inline-flex h-11 items-center justify-center rounded-md px-2 text-sm text-slate-600 hover:bg-slate-100"
                    on:click=move |_| doc.duplicate(key)>"Duplicate"</button>
                <button type="button" class="inline-flex h-11 items-center justify-center rounded-md px-2 text-sm text-red-600 hover:bg-red-50"
                    on:click=move |_| doc.remove(key)>"Delete"</button>
                </div>
            </div>
            <div class="space-y-3 p-3">
                <BlockFields doc=doc block=entry.block path=path id=doc.id(&format!("block-{key}")) on_change=Callback::new(move |()| doc.changed())/>
            </div>
        </li>
    }
}

/// The key of the block at a point of the window, if any.
fn block_under(x: i32, y: i32) -> Option<u64> {
    let element = document().element_from_point(x as f32, y as f32)?;
    let block = element.closest("[data-block-key]").ok()??;
    block.get_attribute("data-block-key")?.parse().ok()
}

/// The serialized `type` of a block (for tests and styling).
fn kind_of(b: &Block) -> &'static str {
    match b {
        Block::Heading { .. } => "heading",
        Block::Paragraph { .. } => "paragraph",
        Block::Image { .. } => "image",
        Block::Button { .. } => "button",
        Block::Divider => "divider",
        Block::Spacer { .. } => "spacer",
        Block::Columns { .. } => "columns",
        Block::Quote { .. } => "quote",
        Block::Code { .. } => "code",
        Block::Social { .. } => "social",
        Block::Html { .. } => "html",
        Block::Footer { .. } => "footer",
    }
}

/// A change to one block.
type Edit = Box<dyn FnOnce(&mut Block)>;

fn edit(change: impl FnOnce(&mut Block) + 'static) -> Edit {
    Box::new(change)
}

/// The last save's message for `{path}.{field}`, or else the template error the preview found
/// there.
fn field_error(doc: Doc, path: Signal<String>, field: &'static str) -> Signal<Option<String>> {
    Signal::derive(move || {
        let key = if field.is_empty() { path.get() } else { format!("{}.{field}", path.get()) };
        doc.source
            .errors
            .with(|e| e.iter().find(|e| e.field.as_deref() == Some(key.as_str())).map(|e| e.message.clone()))
            .or_else(|| {
                doc.source.render_error.with(|r| {
                    r.as_ref()
                        .filter(|r| r.field.as_deref() == Some(key.as_str()))
                        .map(|r| format!("The template has an error here: {}", r.message))
                })
            })
    })
}

/// The preview's template error is in the block at `path` (or in a block inside it).
fn holds_render_error(doc: Doc, path: &str) -> bool {
    let inside = format!("{path}.");
    doc.source
        .render_error
        .with(|r| r.as_ref().and_then(|r| r.field.as_deref()).is_some_and(|f| f.starts_with(&inside)))
}

/// One block's fields. `id` prefixes its inputs' ids; `path` names its errors.
#[component]
fn BlockFields(
    doc: Doc,
    block: RwSignal<Block>,
    path: Signal<String>,
    id: String,
    on_change: Callback<()>,
    #[prop(optional)] nested: bool,
) -> AnyView {
    // Applies an edit to this block and saves. (`AnyView`, not `impl IntoView`: columns hold
    // block fields, and a recursive opaque type cannot be named.)
    let set = move |edit: Edit| {
        block.update(|b| edit(b));
        on_change.run(());
    };
    let err = move |field: &'static str| field_error(doc, path, field);
    let input_id = {
        let id = id.clone();
        move |field: &str| format!("{id}-{field}")
    };
    match block.get_untracked() {
        Block::Heading { text, level } => view! {
            <div class="grid grid-cols-1 gap-3 sm:grid-cols-[1fr_10rem]">
                <BlockInput id=input_id("text") label="Heading" initial=text error=err("text")
                    set=Callback::new(move |v| set(edit(move |b| if let Block::Heading { text, .. } = b { *text = v })))/>
                <div>
                    <label for=input_id("level") class="label">"Size"</label>
                    <select id=input_id("level") class="input" on:change=move |ev| {
                        let level: u8 = event_target_value(&ev).parse().unwrap_or(2);
                        set(edit(move |b| if let Block::Heading { level: l, .. } = b { *l = level }));
                    }>
                        <option value="1" selected=level == 1>"Title"</option>
                        <option value="2" selected=level == 2>"Heading"</option>
                        <option value="3" selected=level == 3>"Subheading"</option>
                    </select>
                </div>
            </div>
        }
        .into_any(),
        Block::Paragraph { text } => view! {
            <MarkdownInput id=input_id("text") label="Text" initial=text error=err("text")
                set=Callback::new(move |v| set(edit(move |b| if let Block::Paragraph { text } = b { *text = v })))/>
        }
        .into_any(),
        Block::Quote { text } => view! {
            <MarkdownInput id=input_id("text") label="Quotation" initial=text error=err("text")
                set=Callback::new(move |v| set(edit(move |b| if let Block::Quote { text } = b { *text = v })))/>
        }
        .into_any(),
        Block::Footer { text } => view! {
            <MarkdownInput id=input_id("text") label="Footer text" initial=text error=err("text")
                hint="Your postal address is added below it. A link to {{ unsubscribe_url }} replaces Herald's own unsubscribe link."
                set=Callback::new(move |v| set(edit(move |b| if let Block::Footer { text } = b { *text = v })))/>
        }
        .into_any(),
        Block::Code { text } => view! {
            <BlockInput id=input_id("text") label="Code" initial=text error=err("text") multiline=true mono=true
                set=Callback::new(move |v| set(edit(move |b| if let Block::Code { text } = b { *text = v })))/>
        }
        .into_any(),
        Block::Html { html } => view! {
            <BlockInput id=input_id("html") label="HTML" initial=html error=err("html") multiline=true mono=true
                hint="Sent as written; merge tags work here too."
                set=Callback::new(move |v| set(edit(move |b| if let Block::Html { html } = b { *html = v })))/>
        }
        .into_any(),
        Block::Image { src, alt, href, width } => {
            // The address is also set by an upload or a pick from the library: bound to a signal.
            let src_value = RwSignal::new(src);
            let set_src = Callback::new(move |v: String| {
                src_value.set(v.clone());
                set(edit(move |b| if let Block::Image { src, .. } = b { *src = v }));
            });
            let uploads = RwSignal::new(Vec::<UploadState>::new());
            let picked = Callback::new(move |m: Media| set_src.run(m.url));
            view! {
                <BlockInput id=input_id("src") label="Image address" initial=String::new() bind=src_value error=err("src") input_type="url"
                    placeholder="https://…" set=set_src/>
                <div class="flex flex-wrap items-center gap-2">
                    <label class="btn-secondary cursor-pointer">
                        "Upload an image"
                        <input type="file" class="sr-only" accept="image/png,image/jpeg,image/gif,image/webp"
                            aria-label="Upload an image for this block" on:change=move |ev| upload_chosen(&ev, uploads, picked)/>
                    </label>
                    <LibraryPicker id=input_id("library") on_pick=picked/>
                </div>
                <UploadList states=uploads/>
                <BlockInput id=input_id("alt") label="Description (alt text)" initial=alt error=err("alt")
                    hint="What the image shows, for readers who cannot see it."
                    set=Callback::new(move |v| set(edit(move |b| if let Block::Image { alt, .. } = b { *alt = v })))/>
                <div class="grid grid-cols-1 gap-3 sm:grid-cols-[1fr_8rem]">
                    <BlockInput id=input_id("href") label="Link (optional)" initial=href error=err("href") input_type="url"
                        placeholder="https://…"
                        set=Callback::new(move |v| set(edit(move |b| if let Block::Image { href, .. } = b { *href = v })))/>
                    <BlockInput id=input_id("width") label="Width (px)" initial=width.to_string() error=err("width") input_type="number"
                        set=Callback::new(move |v: String| {
                            let w = v.trim().parse().unwrap_or(0);
                            set(edit(move |b| if let Block::Image { width, .. } = b { *width = w }))
                        })/>
                </div>
                <p class="text-xs text-slate-500">{format!("At most {CONTENT_WIDTH} px, the width of the mail.")}</p>
            }
            .into_any()
        }
        Block::Button { label, href } => view! {
            <div class="grid grid-cols-1 gap-3 sm:grid-cols-2">
                <BlockInput id=input_id("label") label="Button text" initial=label error=err("label")
                    set=Callback::new(move |v| set(edit(move |b| if let Block::Button { label, .. } = b { *label = v })))/>
                <BlockInput id=input_id("href") label="Link" initial=href error=err("href") input_type="url"
                    set=Callback::new(move |v| set(edit(move |b| if let Block::Button { href, .. } = b { *href = v })))/>
            </div>
        }
        .into_any(),
        Block::Divider => view! { <hr class="border-slate-200"/> }.into_any(),
        Block::Spacer { height } => view! {
            <BlockInput id=input_id("height") label="Height (px)" initial=height.to_string() error=err("height") input_type="number"
                set=Callback::new(move |v: String| {
                    let h = v.trim().parse().unwrap_or(0);
                    set(edit(move |b| if let Block::Spacer { height } = b { *height = h }))
                })/>
        }
        .into_any(),
        Block::Social { links } => view! { <SocialFields doc=doc block=block path=path id=id links=links on_change=on_change/> }.into_any(),
        Block::Columns { .. } if nested => view! {
            <p class="text-sm text-red-600" role="alert">{move || err("").get().unwrap_or_else(|| "Columns cannot sit inside a column.".into())}</p>
        }
        .into_any(),
        Block::Columns { columns } => view! { <ColumnsFields doc=doc block=block path=path id=id columns=columns on_change=on_change/> }.into_any(),
    }
}

/// A labelled input or textarea that reports each change.
#[component]
fn BlockInput(
    id: String,
    label: &'static str,
    initial: String,
    error: Signal<Option<String>>,
    set: Callback<String>,
    #[prop(optional)] multiline: bool,
    #[prop(optional)] mono: bool,
    #[prop(optional)] input_type: &'static str,
    #[prop(optional)] placeholder: &'static str,
    #[prop(optional)] hint: &'static str,
    /// Set when something other than typing changes the value (an upload): the input follows it.
    #[prop(optional)]
    bind: Option<RwSignal<String>>,
) -> impl IntoView {
    let error_id = format!("{id}-error");
    // A one-line input follows its signal (`value` for the server's HTML, `prop:value` after);
    // a textarea is left to the browser once filled.
    let value = bind.unwrap_or_else(|| RwSignal::new(initial.clone()));
    let class = move || {
        let base = if error.get().is_some() { "input border-red-400" } else { "input" };
        if mono { format!("{base} font-mono text-xs") } else { base.to_string() }
    };
    let control = if multiline {
        view! {
            <textarea id=id.clone() rows="6" class=class spellcheck=(!mono).to_string() placeholder=placeholder
                aria-describedby=error_id.clone() aria-invalid=move || error.get().is_some().to_string()
                on:input=move |ev| set.run(event_target_value(&ev))>{initial}</textarea>
        }
        .into_any()
    } else {
        view! {
            <input id=id.clone() type=if input_type.is_empty() { "text" } else { input_type } class=class
                value=value.get_untracked() prop:value=value placeholder=placeholder autocomplete="off"
                aria-describedby=error_id.clone() aria-invalid=move || error.get().is_some().to_string()
                on:input=move |ev| {
                    let v = event_target_value(&ev);
                    value.set(v.clone());
                    set.run(v);
                }/>
        }
        .into_any()
    };
    view! {
        <div class="min-w-0">
            <label for=id class="label">{label}</label>
            {control}
            {(!hint.is_empty()).then(|| view! { <p class="mt-1 text-xs text-slate-500">{hint}</p> })}
            <p id=error_id class="mt-1 text-xs text-red-600" role="alert">{move || error.get()}</p>
        </div>
    }
}

/// A Markdown textarea with buttons for bold, italic, a link and a list, which wrap the
/// selected text.
#[component]
fn MarkdownInput(
    id: String,
    label: &'static str,
    initial: String,
    error: Signal<Option<String>>,
    set: Callback<String>,
    #[prop(optional)] hint: &'static str,
) -> impl IntoView {
    let area = NodeRef::<html::Textarea>::new();
    let error_id = format!("{id}-error");
    let wrap = move |before: &'static str, after: &'static str| {
        let Some(el) = area.get_untracked() else { return };
        let value = el.value();
        let start = utf16_to_byte(&value, el.selection_start().ok().flatten().unwrap_or(0));
        let end = utf16_to_byte(&value, el.selection_end().ok().flatten().unwrap_or(0)).max(start);
        let selected = &value[start..end];
        let new = format!("{}{before}{selected}{after}{}", &value[..start], &value[end..]);
        el.set_value(&new);
        let caret = utf16_len(&value[..start]) + utf16_len(before) + utf16_len(selected);
        let _ = el.set_selection_range(caret, caret);
        let _ = el.focus();
        set.run(new);
    };
    let tool = "inline-flex h-11 min-w-11 items-center justify-center rounded-md px-2 text-sm text-slate-700 hover:bg-slate-100";
    view! {
        <div class="min-w-0">
            <label for=id.clone() class="label">{label}</label>
            <div class="mb-1 flex flex-wrap gap-1" role="toolbar" aria-label=format!("{label} formatting")>
                <button type="button" class=tool aria-label="Bold" on:click=move |_| wrap("**", "**")><b>"B"</b></button>
                <button type="button" class=tool aria-label="Italic" on:click=move |_| wrap("_", "_")><i>"I"</i></button>
                <button type="button" class=tool aria-label="Link" on:click=move |_| wrap("[", "](https://)")>"Link"</button>
                <button type="button" class=tool aria-label="List" on:click=move |_| wrap("\n- ", "")>"List"</button>
            </div>
            <textarea id=id node_ref=area rows="4" class=move || if error.get().is_some() { "input border-red-400" } else { "input" }
                aria-describedby=error_id.clone() aria-invalid=move || error.get().is_some().to_string()
                on:input=move |ev| set.run(event_target_value(&ev))>{initial}</textarea>
            <p class="mt-1 text-xs text-slate-500">
                {if hint.is_empty() { "**bold**, _italic_, [a link](https://…), lines starting with - for a list; merge tags such as {{ reader.name }} work." } else { hint }}
            </p>
            <p id=error_id class="mt-1 text-xs text-red-600" role="alert">{move || error.get()}</p>
        </div>
    }
}

/// The byte offset of the `units`-th UTF-16 unit (the browser counts selections in those).
fn utf16_to_byte(s: &str, units: u32) -> usize {
    let mut seen = 0u32;
    for (i, c) in s.char_indices() {
        if seen >= units {
            return i;
        }
        seen += c.len_utf16() as u32;
    }
    s.len()
}

fn utf16_len(s: &str) -> u32 {
    s.encode_utf16().count() as u32
}

#[component]
fn SocialFields(
    doc: Doc,
    block: RwSignal<Block>,
    path: Signal<String>,
    id: String,
    links: Vec<SocialLink>,
    on_change: Callback<()>,
) -> impl IntoView {
    // Adding or removing a link rebuilds the rows (a click, so no field loses a caret).
    let rows = RwSignal::new(links.len());
    let set_link = move |i: usize, label: Option<String>, url: Option<String>| {
        block.update(|b| {
            if let Block::Social { links } = b
                && let Some(link) = links.get_mut(i)
            {
                if let Some(l) = label {
                    link.label = l;
                }
                if let Some(u) = url {
                    link.url = u;
                }
            }
        });
        on_change.run(());
    };
    view! {
        {move || {
            rows.track();
            let id = id.clone();
            let links = block.with_untracked(|b| if let Block::Social { links } = b { links.clone() } else { Vec::new() });
            links.into_iter().enumerate().map(|(i, link)| {
                let at = Signal::derive(move || format!("{}.links.{i}", path.get()));
                view! {
                    <div class="grid grid-cols-1 items-start gap-2 sm:grid-cols-[10rem_1fr_auto]">
                        <BlockInput id=format!("{id}-link-{i}-label") label="Label" initial=link.label error=field_error(doc, at, "label")
                            set=Callback::new(move |v| set_link(i, Some(v), None))/>
                        <BlockInput id=format!("{id}-link-{i}-url") label="Link" initial=link.url error=field_error(doc, at, "url") input_type="url"
                            set=Callback::new(move |v| set_link(i, None, Some(v)))/>
                        <button type="button" class="btn-secondary mt-6" on:click=move |_| {
                            doc.checkpoint();
                            block.update(|b| if let Block::Social { links } = b && i < links.len() { links.remove(i); });
                            rows.update(|r| *r = r.saturating_sub(1));
                            on_change.run(());
                        }>"Remove"</button>
                    </div>
                }
            }).collect_view()
        }}
        <button type="button" class="btn-secondary" on:click=move |_| {
            doc.checkpoint();
            block.update(|b| if let Block::Social { links } = b { links.push(SocialLink { label: "Website".into(), url: "https://".into() }) });
            rows.update(|r| *r += 1);
            on_change.run(());
        }>"Add a link"</button>
        <p class="text-xs text-red-600" role="alert">{move || field_error(doc, path, "").get()}</p>
    }
}

/// A change to the columns of a columns block (adding or removing one of their blocks).
type ColumnsEdit = Box<dyn FnOnce(&mut Vec<Column>)>;

/// The blocks a column can hold.
const COLUMN_KINDS: &[(&str, &str)] = &[
    ("paragraph", "Paragraph"),
    ("heading", "Heading"),
    ("image", "Image"),
    ("button", "Button"),
    ("divider", "Divider"),
    ("spacer", "Spacer"),
    ("quote", "Quote"),
];

#[component]
fn ColumnsFields(
    doc: Doc,
    block: RwSignal<Block>,
    path: Signal<String>,
    id: String,
    columns: Vec<Column>,
    on_change: Callback<()>,
) -> impl IntoView {
    // The columns' blocks each get a signal of their own; an edit writes the block back into
    // the columns block. Adding or removing one rebuilds the columns (a click, not a keystroke).
    let shape = RwSignal::new(0u32);
    let count = columns.len();
    let structure = move |edit: ColumnsEdit| {
        doc.checkpoint();
        block.update(|b| {
            if let Block::Columns { columns } = b {
                edit(columns);
            }
        });
        shape.update(|s| *s += 1);
        on_change.run(());
    };
    view! {
        <div class=if count == 3 { "grid grid-cols-1 gap-3 md:grid-cols-3" } else { "grid grid-cols-1 gap-3 md:grid-cols-2" }>
            {move || {
                shape.track();
                let columns = block.with_untracked(|b| if let Block::Columns { columns } = b { columns.clone() } else { Vec::new() });
                columns.into_iter().enumerate().map(|(c, column)| {
                    let id = format!("{id}-col-{c}");
                    let kind = RwSignal::new("paragraph".to_string());
                    let inner = column.blocks.into_iter().enumerate().map(|(j, inner)| {
                        let inner = RwSignal::new(inner);
                        let inner_path = Signal::derive(move || format!("{}.columns.{c}.blocks.{j}", path.get()));
                        let write_back = Callback::new(move |()| {
                            block.update(|b| {
                                if let Block::Columns { columns } = b
                                    && let Some(slot) = columns.get_mut(c).and_then(|col| col.blocks.get_mut(j))
                                {
                                    *slot = inner.get_untracked();
                                }
                            });
                            on_change.run(());
                        });
                        let label = inner.with_untracked(Block::label);
                        view! {
                            <div class="rounded-md border border-slate-200 p-2" data-testid="column-block">
                                <div class="mb-2 flex items-center justify-between">
                                    <span class="text-xs font-semibold text-slate-500 uppercase">{label}</span>
                                    <button type="button" class="inline-flex h-11 items-center rounded-md px-2 text-sm text-red-600 hover:bg-red-50"
                                        on:click=move |_| structure(Box::new(move |cols: &mut Vec<Column>| {
                                            if let Some(col) = cols.get_mut(c) && j < col.blocks.len() { col.blocks.remove(j); }
                                        }))>"Remove"</button>
                                </div>
                                <div class="space-y-2">
                                    <BlockFields doc=doc block=inner path=inner_path id=format!("{id}-{j}") on_change=write_back nested=true/>
                                </div>
                            </div>
                        }
                        .into_any()
                    }).collect_view();
                    view! {
                        <div class="min-w-0 space-y-2 rounded-md bg-slate-50 p-2" data-testid="column">
                            <p class="text-xs font-medium text-slate-600">{format!("Column {}", c + 1)}</p>
                            {inner}
                            <div class="flex flex-wrap items-end gap-1">
                                <select class="input min-w-36 flex-1" aria-label=format!("Block to add to column {}", c + 1)
                                    on:change=move |ev| kind.set(event_target_value(&ev))>
                                    {COLUMN_KINDS.iter().map(|(v, l)| view! { <option value=*v>{*l}</option> }).collect_view()}
                                </select>
                                <button type="button" class="btn-secondary" on:click=move |_| {
                                    if let Some(new) = Block::new(&kind.get_untracked()) {
                                        structure(Box::new(move |cols: &mut Vec<Column>| if let Some(col) = cols.get_mut(c) { col.blocks.push(new) }));
                                    }
                                }>"Add"</button>
                            </div>
                        </div>
                    }
                }).collect_view()
            }}
        </div>
    }
}
