"""Forms over the sections of the RunConfig; each has ``config_section()`` and
``set_config_section()`` and shows validation messages next to the field they concern."""
from gui_app.ui.config.dataset_form import DatasetForm, guess_dataset
from gui_app.ui.config.form_base import FormSection, split_error
from gui_app.ui.config.model_form import ModelForm
from gui_app.ui.config.strategy_form import StrategyForm
from gui_app.ui.config.training_form import TrainingForm

__all__ = ["DatasetForm", "FormSection", "ModelForm", "StrategyForm", "TrainingForm", "guess_dataset", "split_error"]
