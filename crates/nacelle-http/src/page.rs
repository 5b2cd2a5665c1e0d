//! Nacos's `Page<T>` (`api/model/Page.java`) as every API family writes a page:
//! `totalCount`, `pageNumber`, `pagesAvailable`, `pageItems`.

use nacelle_core::Page;
use serde::Serialize;

/// A page of the service's results in Nacos's JSON, each item in its wire form.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PageJson<T: Serialize> {
    pub total_count: u64,
    pub page_number: u64,
    pub pages_available: u64,
    pub page_items: Vec<T>,
}

impl<U: Serialize> PageJson<U> {
    /// `page` with each item shown by `f` (the items may borrow from `page`).
    pub fn of<'a, T>(page: &'a Page<T>, f: impl FnMut(&'a T) -> U) -> Self {
        PageJson {
            total_count: page.total_count,
            page_number: page.page_number,
            pages_available: page.pages_available,
            page_items: page.items.iter().map(f).collect(),
        }
    }
}
