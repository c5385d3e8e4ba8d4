//! `mocks`: fixed responses for matching requests, inline and from a mocks file.

use super::{Compiler, Shared, WrittenIn};
use crate::error::key;
use crate::file::{RawMock, RawMocks, RawMocksFile};
use holdoff_proxy::fault::MockRule;

impl Compiler {
    /// The mocks of `mocks`, the inline ones then the mocks file's, added to `rules`.
    pub(super) fn mocks(
        &mut self,
        at: WrittenIn<'_>,
        mocks: &RawMocks,
        shared: &Shared,
        rules: &mut Vec<MockRule>,
    ) {
        let check = |this: &mut Compiler, at: WrittenIn<'_>, path: &str, mock: &RawMock| {
            this.mock(at, path, mock, shared)
        };
        self.list(at, "mocks.mocks", &mocks.mocks, rules, check);
        if let Some(name) = &mocks.file {
            self.data_file(
                at,
                "mocks.file",
                name,
                "mocks",
                |this, inner, data: RawMocksFile| {
                    this.list(inner, "mocks", &data.mocks, rules, check);
                },
            );
        }
    }

    fn mock(
        &mut self,
        at: WrittenIn<'_>,
        path: &str,
        raw: &RawMock,
        shared: &Shared,
    ) -> Option<MockRule> {
        let request_path = key(path, "request");
        let request = self.request(at, &request_path, &raw.request);
        let nth = match raw.request.nth {
            Some(0) => {
                self.error(
                    at,
                    key(&request_path, "nth"),
                    "`nth` counts matching requests from 1: 1 answers the first, 2 the second",
                );
                None
            }
            nth => Some(nth),
        };
        let response = self.response(at, &key(path, "response"), &raw.response, shared);
        Some(MockRule {
            request: request?,
            nth: nth?,
            response: response?,
        })
    }
}
