//! Where the formatters' locale data comes from: boa's own (decimal
//! symbols, plural rules, dates) and ICU4X's experimental crate (percent,
//! currency and relative-time patterns), so that no ICU data is built in
//! twice. A formatter's provider serves each of its markers from one of
//! them (`from_boa!`, `from_baked!`).

use icu_provider::prelude::*;
use serde::Deserialize;

/// Boa's locale data, for any marker it holds.
pub(super) struct Boa;

impl<M> DataProvider<M> for Boa
where
    M: DataMarker,
    for<'de> <M::DataStruct as yoke::Yokeable<'de>>::Output: Deserialize<'de>,
{
    fn load(&self, req: DataRequest) -> Result<DataResponse<M>, DataError> {
        use icu_provider::buf::AsDeserializingBufferProvider;
        boa_icu_provider::buffer().as_deserializing().load(req)
    }
}

/// `$provider` serves `$marker`s from ICU4X's experimental data.
macro_rules! from_baked {
    ($provider:ty, $($marker:ty),* $(,)?) => {$(
        impl icu_provider::DataProvider<$marker> for $provider {
            fn load(
                &self,
                req: icu_provider::DataRequest,
            ) -> Result<icu_provider::DataResponse<$marker>, icu_provider::DataError> {
                icu_experimental::provider::Baked.load(req)
            }
        }
    )*};
}

/// `$provider` serves `$marker`s from boa's data.
macro_rules! from_boa {
    ($provider:ty, $($marker:ty),* $(,)?) => {$(
        impl icu_provider::DataProvider<$marker> for $provider {
            fn load(
                &self,
                req: icu_provider::DataRequest,
            ) -> Result<icu_provider::DataResponse<$marker>, icu_provider::DataError> {
                $crate::script::intl::data::Boa.load(req)
            }
        }
    )*};
}

pub(super) use {from_baked, from_boa};
