//! `aibox-policy`: pure security policy gates.
