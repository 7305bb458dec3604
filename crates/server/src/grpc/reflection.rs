//! Server reflection, `grpc.reflection.v1.ServerReflection` and its older twin `v1alpha`
//! (what grpcurl and Postman ask): [`Reflection`] lists the services of the router it is
//! served on and answers descriptor requests from the encoded `FileDescriptorSet`s the
//! application registers.
//!
//! Owns the index of files and symbols, built once at registration; a call only looks up
//! and copies encoded files. The two versions' messages are the same on the wire, so both
//! paths decode into v1's types.
#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use linerate_grpc::proto::grpc::reflection::v1::server_reflection_request::MessageRequest;
use linerate_grpc::proto::grpc::reflection::v1::server_reflection_response::MessageResponse;
use linerate_grpc::proto::grpc::reflection::v1::{
    ErrorResponse, ExtensionNumberResponse, FileDescriptorResponse, ListServiceResponse,
    ServerReflectionRequest, ServerReflectionResponse, ServiceResponse,
};
use linerate_grpc::proto::grpc::reflection::{v1, v1alpha};
use prost::Message as _;
use prost_types::{FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet};

use super::{Code, Method, Request, Service, ServiceList, Sink, Status, Streaming};

/// The reflection service: `Router::grpc(Reflection::new())`. It lists the router's services
/// (a merged group's reflection: its group's) and describes what the registered descriptor
/// sets hold.
#[derive(Clone, Debug)]
pub struct Reflection {
    index: Index,
    services: ServiceList,
}

/// The registered files, by name, and where each symbol is declared.
#[derive(Clone, Debug, Default)]
struct Index {
    files: HashMap<String, Arc<File>>,
    /// `package.Message`, `package.Message.Nested`, `package.Enum`, `package.Service`,
    /// `package.Service.Method`, extensions: the file declaring it.
    symbols: HashMap<String, String>,
    /// An extended message's name: its extensions' numbers and files.
    extensions: HashMap<String, Vec<(i32, String)>>,
}

#[derive(Debug)]
struct File {
    encoded: Vec<u8>,
    dependencies: Vec<String>,
}

impl Default for Reflection {
    fn default() -> Reflection {
        Reflection::new()
    }
}

impl Reflection {
    /// A reflection service describing linerate-grpc's own files (the health and reflection
    /// services, gRPC's interop TestService, HttpArena's benchmark); add the application's
    /// with [`register`](Reflection::register).
    pub fn new() -> Reflection {
        let builtin = FileDescriptorSet::decode(linerate_grpc::proto::FILE_DESCRIPTOR_SET)
            .expect("linerate-grpc's descriptor set is prost's own encoding");
        let mut reflection = Reflection {
            index: Index::default(),
            services: ServiceList::default(),
        };
        reflection.index.add(builtin);
        reflection
    }

    /// Adds an encoded `google.protobuf.FileDescriptorSet` (linerate-grpc's
    /// `build::Builder::file_descriptor_set` writes one; so does `protoc
    /// --descriptor_set_out --include_imports`). A file already registered under the same
    /// name is kept as it was.
    pub fn register(mut self, encoded_set: &[u8]) -> Result<Reflection, prost::DecodeError> {
        self.index.add(FileDescriptorSet::decode(encoded_set)?);
        Ok(self)
    }

    /// The answer to one request (v1's messages; v1alpha's are the same bytes).
    fn answer(&self, req: ServerReflectionRequest) -> ServerReflectionResponse {
        let response = match &req.message_request {
            Some(MessageRequest::ListServices(_)) => {
                MessageResponse::ListServicesResponse(ListServiceResponse {
                    service: self
                        .services
                        .names()
                        .into_iter()
                        .map(|name| ServiceResponse {
                            name: name.to_string(),
                        })
                        .collect(),
                })
            }
            Some(MessageRequest::FileByFilename(name)) => self.files(Some(name.as_str()), name),
            Some(MessageRequest::FileContainingSymbol(symbol)) => {
                let symbol = symbol.trim_start_matches('.');
                self.files(self.index.symbols.get(symbol).map(String::as_str), symbol)
            }
            Some(MessageRequest::FileContainingExtension(ext)) => {
                let ty = ext.containing_type.trim_start_matches('.');
                let file = self.index.extensions.get(ty).and_then(|all| {
                    all.iter()
                        .find(|(n, _)| *n == ext.extension_number)
                        .map(|(_, f)| f.as_str())
                });
                self.files(file, &format!("{ty} extension {}", ext.extension_number))
            }
            Some(MessageRequest::AllExtensionNumbersOfType(ty)) => {
                let ty = ty.trim_start_matches('.');
                if self.index.symbols.contains_key(ty) {
                    MessageResponse::AllExtensionNumbersResponse(ExtensionNumberResponse {
                        base_type_name: ty.to_string(),
                        extension_number: self
                            .index
                            .extensions
                            .get(ty)
                            .map(|all| all.iter().map(|(n, _)| *n).collect())
                            .unwrap_or_default(),
                    })
                } else {
                    not_found(ty)
                }
            }
            None => MessageResponse::ErrorResponse(ErrorResponse {
                error_code: Code::InvalidArgument as i32,
                error_message: "a request without a message_request".into(),
            }),
        };
        ServerReflectionResponse {
            valid_host: req.host.clone(),
            original_request: Some(req),
            message_response: Some(response),
        }
    }

    /// The file named `file` and every file it imports, itself first, each once; NOT_FOUND
    /// naming `what` when there is none.
    fn files(&self, file: Option<&str>, what: &str) -> MessageResponse {
        let Some(first) = file.filter(|f| self.index.files.contains_key(*f)) else {
            return not_found(what);
        };
        let mut seen = HashSet::from([first.to_string()]);
        let mut queue = vec![first.to_string()];
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(name) = queue.get(at) {
            at += 1;
            // An import outside the registered sets is left for the client to report.
            let Some(f) = self.index.files.get(name) else {
                continue;
            };
            out.push(f.encoded.clone());
            for dep in &f.dependencies {
                if seen.insert(dep.clone()) {
                    queue.push(dep.clone());
                }
            }
        }
        MessageResponse::FileDescriptorResponse(FileDescriptorResponse {
            file_descriptor_proto: out,
        })
    }

    async fn serve(
        &self,
        mut req: Request<Streaming<ServerReflectionRequest>>,
        out: &mut Sink<ServerReflectionResponse>,
    ) -> Result<(), Status> {
        while let Some(m) = req.get_mut().message().await? {
            out.send(&self.answer(m)).await?;
        }
        Ok(())
    }
}

fn not_found(what: &str) -> MessageResponse {
    MessageResponse::ErrorResponse(ErrorResponse {
        error_code: Code::NotFound as i32,
        error_message: format!("{what} not found"),
    })
}

impl Index {
    fn add(&mut self, set: FileDescriptorSet) {
        for mut file in set.file {
            let name = file.name().to_string();
            if self.files.contains_key(&name) {
                continue;
            }
            // Comments and spans are for editors; a client only needs the declarations.
            file.source_code_info = None;
            self.symbols_of(&file, &name);
            self.files.insert(
                name,
                Arc::new(File {
                    encoded: file.encode_to_vec(),
                    dependencies: file.dependency.clone(),
                }),
            );
        }
    }

    fn symbols_of(&mut self, file: &FileDescriptorProto, name: &str) {
        let prefix = match file.package() {
            "" => String::new(),
            p => format!("{p}."),
        };
        for m in &file.message_type {
            self.message(&prefix, m, name);
        }
        for e in &file.enum_type {
            self.symbol(format!("{prefix}{}", e.name()), name);
        }
        for s in &file.service {
            let service = format!("{prefix}{}", s.name());
            for m in &s.method {
                self.symbol(format!("{service}.{}", m.name()), name);
            }
            self.symbol(service, name);
        }
        for x in &file.extension {
            self.extension(&prefix, x, name);
        }
    }

    fn message(&mut self, prefix: &str, m: &prost_types::DescriptorProto, file: &str) {
        let full = format!("{prefix}{}", m.name());
        let inner = format!("{full}.");
        for nested in &m.nested_type {
            self.message(&inner, nested, file);
        }
        for e in &m.enum_type {
            self.symbol(format!("{inner}{}", e.name()), file);
        }
        for x in &m.extension {
            self.extension(&inner, x, file);
        }
        self.symbol(full, file);
    }

    fn extension(&mut self, prefix: &str, x: &FieldDescriptorProto, file: &str) {
        self.symbol(format!("{prefix}{}", x.name()), file);
        self.extensions
            .entry(x.extendee().trim_start_matches('.').to_string())
            .or_default()
            .push((x.number(), file.to_string()));
    }

    fn symbol(&mut self, symbol: String, file: &str) {
        self.symbols
            .entry(symbol)
            .or_insert_with(|| file.to_string());
    }
}

impl Service for Reflection {
    fn name(&self) -> &'static str {
        v1::server_reflection_methods::SERVICE.name
    }

    fn served_by(&mut self, services: &ServiceList) {
        self.services = services.clone();
    }

    fn methods(self) -> Vec<Method> {
        let this = Arc::new(self);
        let alpha = this.clone();
        vec![
            Method::bidi_streaming(
                v1::server_reflection_methods::SERVER_REFLECTION_INFO.path,
                move |req, mut out| {
                    let this = this.clone();
                    async move {
                        let outcome = this.serve(req, &mut out).await;
                        (outcome, out)
                    }
                },
            ),
            Method::bidi_streaming(
                v1alpha::server_reflection_methods::SERVER_REFLECTION_INFO.path,
                move |req, mut out| {
                    let this = alpha.clone();
                    async move {
                        let outcome = this.serve(req, &mut out).await;
                        (outcome, out)
                    }
                },
            ),
        ]
    }
}
