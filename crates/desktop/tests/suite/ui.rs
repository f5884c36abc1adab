//! The window under iced_test's simulator.
