"""A test-only Langflow component whose output is a `RecordingChatModel`, for flows run offline."""

from lfx.custom.custom_component.component import Component
from lfx.field_typing import LanguageModel
from lfx.io import BoolInput, MessageTextInput, Output

from tests.fake_models import RECORDERS, RecordingChatModel


class RecordingModelComponent(Component):
    display_name = "Recording Model"
    description = "Offline chat model for tests; records every input it receives."
    name = "RecordingModel"

    inputs = [  # noqa: RUF012
        MessageTextInput(name="recorder_name", display_name="Recorder Name", value="default"),
        MessageTextInput(name="reply", display_name="Reply", value="Noted."),
        BoolInput(name="fail_folds", display_name="Fail Folds", value=False),
    ]
    outputs = [Output(display_name="Language Model", name="model_output", method="build_model")]  # noqa: RUF012

    def build_model(self) -> LanguageModel:
        model = RECORDERS.get(self.recorder_name)
        if model is None:
            model = RecordingChatModel(reply=self.reply, fail_folds=self.fail_folds)
            RECORDERS[self.recorder_name] = model
        return model
